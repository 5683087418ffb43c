"""`lowrank:R`: each weight matrix of a parameter vector as a rank-R product, fp16 factors.

A vector is read as a sequence of segments (`Segs`, from the model's parameter shapes: rows x
cols, tiling the vector in order). A segment where two rank-R factors are smaller than the
matrix is sent as P (rows x R, orthonormal columns) and Q (cols x R), with P Q^T the matrix's
rank-R approximation after one power iteration from the previous call's Q for that segment
(`warm`, the caller's state: PowerSGD, Vogels, Karimireddy and Jaggi 2019; PowerGossip, Vogels
et al. 2020, for gossip). Any other segment (biases, thin matrices) is sent whole. Everything
travels as IEEE fp16, saturated like `compress.fp16_encode`.

Why: differences between peers' models, and between a model and what a partner holds of it,
are sums of a few hundred outer products (one per sample and step) whose spectrum falls fast,
so R = 8 of a 2048 x 2400 layer keeps far more of a difference than the same bytes of its
largest values (topk). With error feedback (gossip.exchange.refs) what the rank leaves out is sent later.

Backend-generic: numpy arrays in, numpy out; cupy arrays in, cupy out (`xp` of the input), the
same arithmetic (matmul, QR) on either; tests/kernels/test_lowrank.py checks them.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from swarmnode.kernels.backend import array_module
from swarmnode.kernels.codec_base import F16_MAX, Packed, _check_vector
from swarmnode.kernels.errors import ShapeError

MAX_RANK = 64  # bounds the decoder's work (2 R flops per value) whatever a frame asks for
MAX_SEGS = 1024  # segments a frame may name (the 4 KiB header cap binds first over the wire)
Segs = tuple[tuple[int, int], ...]  # (rows, cols) of each segment, in order


def segments(shapes: list[tuple[int, ...]]) -> Segs:
    """A model's parameter shapes as (rows, cols) segments: a matrix as it is, a higher-rank
    tensor (a conv kernel: out x in x width) as its first axis by the rest, a vector as 1 x n."""
    out = []
    for shape in shapes:
        if len(shape) == 0 or any(d < 1 for d in shape):
            raise ShapeError(f"parameter shape {shape} has no values")
        size = int(np.prod(shape))
        out.append((1, size) if len(shape) == 1 else (int(shape[0]), size // int(shape[0])))
    return tuple(out)


def check_rank(rank: int) -> int:
    if not 1 <= rank <= MAX_RANK:
        raise ShapeError(f"lowrank rank must be in [1, {MAX_RANK}], got {rank}")
    return rank


def seg_rank(rows: int, cols: int, rank: int) -> int:
    """The rank a segment is sent at: `rank` where the factors are smaller, else 0 (whole)."""
    r = min(rank, rows, cols)
    return r if r * (rows + cols) < rows * cols else 0


def plan(segs: Segs, rank: int) -> list[tuple[int, int, int]]:
    """(rows, cols, rank sent at) per segment: what a frame's header names. Neighbouring
    segments sent whole are merged into one (1 x total): a shorter header, the same bytes."""
    out: list[tuple[int, int, int]] = []
    for rows, cols in segs:
        r = seg_rank(rows, cols, rank)
        if not r and out and not out[-1][2]:
            out[-1] = (1, out[-1][1] + rows * cols, 0)
        else:
            out.append((rows, cols, r) if r else (1, rows * cols, 0))
    return out


def payload_values(plan_: list[tuple[int, int, int]]) -> int:
    """fp16 values a frame of this plan carries."""
    return sum(r * (rows + cols) if r else rows * cols for rows, cols, r in plan_)


def encode(x: Any, segs: Segs, rank: int, warm: dict[int, Any] | None = None) -> Packed:
    """x (float32, 1-D, the segments' total size) -> Packed("lowrank", parts {"values": fp16},
    `segs` = the plan). `warm`: segment index -> last Q, read and updated (None: a fresh start
    from a fixed seeded Q, so that the result depends on x alone)."""
    _check_vector(x)
    xp = array_module(x)
    check_rank(rank)
    p = plan(segs, rank)
    if sum(rows * cols for rows, cols, _ in p) != x.size:
        raise ShapeError(f"lowrank segments hold {sum(a * b for a, b in segs)}, not {x.size}")
    out = xp.empty(payload_values(p), dtype=xp.float32)
    at = off = 0
    for i, (rows, cols, r) in enumerate(p):
        m = x[off : off + rows * cols].reshape(rows, cols)
        off += rows * cols
        if not r:
            out[at : at + m.size] = m.ravel()
            at += m.size
            continue
        q = _start_q(xp, i, cols, r, warm)
        pm, _ = xp.linalg.qr(m @ q)  # one power iteration: an orthonormal basis of M Q
        qm = m.T @ pm  # M^T P: with P P^T M the best approximation in that basis
        if warm is not None:
            warm[i] = qm
        out[at : at + pm.size] = pm.ravel()
        at += pm.size
        out[at : at + qm.size] = qm.ravel()
        at += qm.size
    values = xp.clip(out, -F16_MAX, F16_MAX).astype(xp.float16)
    return Packed("lowrank", int(x.size), {"values": values}, segs=tuple(p))


def decode(p: Packed, out: Any = None) -> Any:
    """The float32 vector a lowrank Packed stands for: P Q^T per factored segment."""
    values = p.parts["values"]
    xp = array_module(values)
    if payload_values(list(p.segs)) != values.size:
        raise ShapeError(f"lowrank payload of {values.size} values, its plan needs more or less")
    if out is None:
        out = xp.empty(p.n, dtype=xp.float32)
    at = off = 0
    for rows, cols, r in p.segs:
        if not r:
            out[off : off + rows * cols] = values[at : at + rows * cols]
            at += rows * cols
        else:
            pm = values[at : at + rows * r].reshape(rows, r).astype(xp.float32)
            at += rows * r
            qm = values[at : at + cols * r].reshape(cols, r).astype(xp.float32)
            at += cols * r
            # the product straight into `out`: no model-sized temporary (98 MB for a 6000 x 4100
            # matrix, then a copy of it)
            xp.matmul(pm, qm.T, out=out[off : off + rows * cols].reshape(rows, cols))
        off += rows * cols
    return out


def _start_q(xp: Any, i: int, cols: int, r: int, warm: dict[int, Any] | None) -> Any:
    q = None if warm is None else warm.get(i)
    if q is not None and q.shape == (cols, r) and bool(xp.isfinite(q).all()) and q.any():
        return q
    rng = np.random.default_rng(1_000_003 * i + cols)  # fixed: same input, same frame
    return xp.asarray(rng.standard_normal((cols, r)).astype(np.float32))
