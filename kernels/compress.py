"""Lossy codecs for float32 parameter vectors: fp16, blockwise int8, top-k sparsification.

Each codec is a pair of functions over flat float32 vectors, with a numpy reference here and a
cupy twin (`swarmnode.kernels.compress_cuda`) that computes the same values in the same order;
tests/kernels/test_gpu_parity.py compares them. Encoders return a `Packed`: named numpy/cupy
arrays whose bytes go on the wire as they are (the wire layout is `swarmnode.gossip.wire_codecs`).

- fp16: a float16 copy, saturated to +-65504 (a value beyond float16's range would become Inf;
  saturating keeps it finite and the error feedback carries the rest later).
- int8: blocks of up to `block` values share one float32 scale max|x| / 127; each value is
  rint(x / scale) in [-127, 127]. Error per value <= scale / 2. 1 + 4 / block bytes per value.
  A block is a strided group within a chunk (`int8_layout`), not a contiguous run.
- topk: the k = ceil(ratio * n) values of largest magnitude, as sorted uint32 indices and
  float32 values. 8 k bytes.

The numpy paths work in chunks of `CHUNK` values with reused scratch buffers, so every pass runs
in cache: a plain `x.astype(np.float16)` over 20 MB is memory bound three times over otherwise
(scripts/bench_codecs.py measures them against a memory copy of the same bytes).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from swarmnode.kernels.codec_base import (
    CHUNK,
    DEFAULT_BLOCK,
    F16_MAX,
    I8_MAX,
    Packed,
    _check_vector,
    int8_layout,
    topk_count,
)
from swarmnode.kernels.errors import ShapeError

__all__ = ["CHUNK", "DEFAULT_BLOCK", "F16_MAX", "I8_MAX", "Packed", "int8_layout", "topk_count"]

# --- fp16 ------------------------------------------------------------------------------------


def fp16_encode(x: np.ndarray) -> Packed:
    """IEEE half, round to nearest even: `astype(float16)` of the saturated input, bit for bit
    except on float16 subnormals (|x| < 6.1e-5), where the two roundings may differ by 2**-24.

    numpy's own float32 -> float16 cast is scalar code (~0.2 GB/s here); this does it with
    integer passes per chunk: x * 2**-112 puts float16's exponent bias into float32's (and
    float16's subnormals onto float32's, bit for bit), then bits >> 13 with round-half-even."""
    _check_vector(x)
    n = x.size
    out = np.empty(n, dtype=np.uint16)
    m = min(CHUNK, n)
    f, t, s = np.empty(m, np.float32), np.empty(m, np.uint32), np.empty(m, np.uint32)
    u = f.view(np.uint32)
    for lo in range(0, n, CHUNK):
        hi = min(lo + CHUNK, n)
        k = hi - lo
        fk, uk, tk, sk = f[:k], u[:k], t[:k], s[:k]
        np.clip(x[lo:hi], -F16_MAX, F16_MAX, out=fk)
        np.multiply(fk, _TO_F16_BIAS, out=fk)
        np.right_shift(uk, 16, out=sk)
        np.bitwise_and(sk, _U32_0x8000, out=sk)  # the sign, at float16's bit 15
        np.bitwise_and(uk, _U32_ABS, out=uk)
        np.right_shift(uk, 13, out=tk)
        np.bitwise_and(tk, _U32_1, out=tk)  # the lowest kept bit: ties go to even
        np.add(tk, uk, out=tk)
        np.add(tk, _U32_0xFFF, out=tk)
        np.right_shift(tk, 13, out=tk)
        np.bitwise_or(tk, sk, out=tk)
        np.copyto(out[lo:hi], tk, casting="unsafe")
    return Packed("fp16", n, {"values": out.view(np.float16)})


def fp16_decode(p: Packed, out: np.ndarray | None = None) -> np.ndarray:
    """Half -> float32 (exact), by integer passes per chunk; Inf/NaN halves are refused."""
    h = p.parts["values"].view(np.uint16)
    out = np.empty(p.n, dtype=np.float32) if out is None else out
    ou = out.view(np.uint32)
    t = np.empty(min(CHUNK, p.n), np.uint32)
    for lo in range(0, p.n, CHUNK):
        hi = min(lo + CHUNK, p.n)
        tk, ok = t[: hi - lo], ou[lo:hi]
        np.copyto(ok, h[lo:hi])
        np.bitwise_and(ok, _U32_0x7FFF, out=tk)
        if (tk >= _U32_0x7C00).any():
            raise ShapeError("fp16 payload holds Inf or NaN")
        np.left_shift(tk, 13, out=tk)
        ft = tk.view(np.float32)
        np.multiply(ft, _FROM_F16_BIAS, out=ft)
        np.bitwise_and(ok, _U32_0x8000, out=ok)
        np.left_shift(ok, 16, out=ok)
        np.bitwise_or(ok, tk, out=ok)
    return out


_TO_F16_BIAS = np.float32(2.0**-112)
_FROM_F16_BIAS = np.float32(2.0**112)
_U32_0x8000 = np.uint32(0x8000)
_U32_0x7FFF = np.uint32(0x7FFF)
_U32_0x7C00 = np.uint32(0x7C00)
_U32_ABS = np.uint32(0x7FFFFFFF)
_U32_0xFFF = np.uint32(0xFFF)
_U32_1 = np.uint32(1)


# --- int8, blockwise -------------------------------------------------------------------------


def int8_scales(amax: Any, xp: Any = np) -> tuple[Any, Any]:
    """(scale, 1 / scale) per block from the block's max |x|; a zero block gets 0 and 0."""
    scale = (amax / xp.float32(I8_MAX)).astype(xp.float32)
    inv = xp.zeros_like(scale)
    if xp is np:  # one masked division, no boolean indexing (this runs once per chunk)
        np.divide(np.float32(I8_MAX), amax, out=inv, where=amax > 0)
    else:
        nz = amax > 0
        inv[nz] = xp.float32(I8_MAX) / amax[nz]
    return scale, inv


def _check_block(block: int) -> None:
    if not (1 <= block <= CHUNK and block & (block - 1) == 0):
        raise ShapeError(f"int8 block must be a power of two in [1, {CHUNK}], got {block}")


def int8_encode(x: np.ndarray, block: int = DEFAULT_BLOCK) -> Packed:
    _check_vector(x)
    _check_block(block)
    n = x.size
    q = np.empty(n, dtype=np.int8)
    scales = np.empty(-(-n // block), dtype=np.float32)
    scratch = np.empty(min(CHUNK, n + block), dtype=np.float32)
    pad = np.empty_like(scratch)
    si = 0
    for lo in range(0, n, CHUNK):
        m = min(CHUNK, n - lo)
        groups, rows = int8_layout(m, block)
        span = rows * groups
        if span == m:
            v = x[lo : lo + m].reshape(rows, groups)
        else:  # the short last chunk, zero-padded (zeros change no block's maximum)
            pad[:m] = x[lo : lo + m]
            pad[m:span] = 0
            v = pad[:span].reshape(rows, groups)
        s = scratch[:span].reshape(rows, groups)
        np.abs(v, out=s)
        scale, inv = int8_scales(s.max(axis=0))
        scales[si : si + groups] = scale
        si += groups
        np.multiply(v, inv, out=s)
        np.rint(s, out=s)
        np.copyto(q[lo : lo + m], s.reshape(-1)[:m], casting="unsafe")
    return Packed("int8", n, {"scales": scales, "q": q}, block=block)


def int8_decode(p: Packed, out: np.ndarray | None = None) -> np.ndarray:
    n, block = p.n, p.block
    _check_block(block)
    q, scales = p.parts["q"], p.parts["scales"]
    out = np.empty(n, dtype=np.float32) if out is None else out
    pad = np.empty(min(CHUNK, n + block), dtype=np.float32)
    si = 0
    for lo in range(0, n, CHUNK):
        m = min(CHUNK, n - lo)
        groups, rows = int8_layout(m, block)
        span = rows * groups
        dst = out[lo : lo + m] if span == m else pad[:span]
        np.copyto(dst[:m], q[lo : lo + m])
        dst[m:span] = 0
        d2 = dst.reshape(rows, groups)
        np.multiply(d2, scales[si : si + groups], out=d2)
        si += groups
        if span != m:
            out[lo : lo + m] = pad[:m]
    return out


def int8_scale_index(n: int, block: int) -> np.ndarray:
    """The index of the scale of each of n values (for tests and readers of the layout)."""
    idx = np.empty(n, dtype=np.int64)
    si = 0
    for lo in range(0, n, CHUNK):
        m = min(CHUNK, n - lo)
        groups, _ = int8_layout(m, block)
        idx[lo : lo + m] = si + np.arange(m) % groups
        si += groups
    return idx


# --- top-k -----------------------------------------------------------------------------------


def topk_encode(x: np.ndarray, ratio: float) -> Packed:
    _check_vector(x)
    k = topk_count(x.size, ratio)
    if k == x.size:
        idx = np.arange(x.size, dtype=np.uint32)
    else:
        mag = np.abs(x)
        idx = np.argpartition(mag, x.size - k)[x.size - k :]
        idx.sort()
        idx = idx.astype(np.uint32)
    return Packed("topk", x.size, {"idx": idx, "values": x[idx]}, k=k)


def topk_decode(p: Packed, out: np.ndarray | None = None) -> np.ndarray:
    out = np.empty(p.n, dtype=np.float32) if out is None else out
    out.fill(0.0)
    out[p.parts["idx"]] = p.parts["values"]
    return out


# --- one front -------------------------------------------------------------------------------


def parse_codec(spec: str) -> tuple[str, float]:
    """`none|fp16|int8|topk:RATIO` -> (name, ratio); raises ShapeError naming the spec."""
    name, _, arg = spec.partition(":")
    if name in ("none", "fp16", "int8") and not arg:
        return name, 0.0
    if name == "topk":
        try:
            ratio = float(arg)
        except ValueError:
            raise ShapeError(f"topk needs a ratio in (0, 1], as topk:0.01; got {spec!r}") from None
        topk_count(1, ratio)
        return name, ratio
    raise ShapeError(f"unknown codec {spec!r} (expected none, fp16, int8 or topk:RATIO)")


def encode(x: Any, codec: str, ratio: float = 0.0, block: int = DEFAULT_BLOCK) -> Packed:
    """Encode with the numpy reference, or the cupy twin for a device array."""
    from swarmnode.kernels.backend import is_device_array

    if is_device_array(x):
        from swarmnode.kernels import compress_cuda

        return compress_cuda.encode(x, codec, ratio, block)
    if codec == "fp16":
        return fp16_encode(x)
    if codec == "int8":
        return int8_encode(x, block)
    if codec == "topk":
        return topk_encode(x, ratio)
    raise ShapeError(f"no encoder for codec {codec!r}")


DECODERS = {"fp16": fp16_decode, "int8": int8_decode, "topk": topk_decode}


def decode(p: Packed, out: Any = None) -> Any:
    """Decode a Packed into a float32 vector (numpy parts -> numpy; cupy parts -> cupy)."""
    from swarmnode.kernels.backend import is_device_array

    if any(is_device_array(v) for v in p.parts.values()):
        from swarmnode.kernels import compress_cuda

        return compress_cuda.decode(p, out)
    if p.codec not in DECODERS:
        raise ShapeError(f"no decoder for codec {p.codec!r}")
    return DECODERS[p.codec](p, out)
