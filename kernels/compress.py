"""Lossy codecs for float32 parameter vectors: fp16, blockwise int8, top-k sparsification.

Each codec is a pair of functions over flat float32 vectors. The definitions are the plain numpy
code in `swarmnode.kernels.compress_ref`; this module is the fast CPU path, and
`swarmnode.kernels.compress_cuda` the cupy twin, both computing the same bits (tests/kernels/
test_compress.py and test_compress_gpu_parity.py compare them). Encoders return a `Packed`:
named numpy/cupy arrays whose bytes go on the wire as they are (layout: `gossip.wire.codecs`).

- fp16: a float16 copy (IEEE, round to nearest even), saturated to +-65504 (a value beyond
  float16's range would become Inf; saturating keeps it finite, the error feedback carries the
  rest later).
- int8: blocks of up to `block` values share one float32 scale max|x| / 127; each value is
  rint(x / scale) in [-127, 127]. Error per value <= scale / 2. 1 + 4 / block bytes per value.
  A block is a strided group within a chunk (`int8_layout`), not a contiguous run.
- topk: the k = ceil(ratio * n) values of largest magnitude: their indices as counts per
  bucket of 65536 values and uint16 offsets, their values in fp16. 4 k + 4 n / 65536 bytes.
- topk2: chunked top-k with 2-bit values (SparseLoCo's compressor, `swarmnode.kernels.topk2`):
  per 4096 values the largest DENSITY share, 12-bit places, a sign and one of two levels each.
- lowrank: each weight matrix as fp16 rank-R factors from one warm-started power iteration
  (`swarmnode.kernels.lowrank`, backend-generic, not bit-for-bit across backends: QR differs).

Speed (scripts/bench/exchange/codecs.py, docs/benchmarks.md): int8 runs a fused C kernel
(kernels/_int8.c through `int8_native`) where the optional extension was built at install, and
otherwise the numpy path below, same bits. The float <-> half casts, and int8's casts on the
numpy path, are NumKong's SIMD kernels (`numkong.astype`: F16C / AVX-512 here, NEON on ARM; bit
for bit numpy's own casts, which are scalar code at ~1-2 GB/s); the per-block reductions and
scalings are numpy passes over one chunk at a time, so that every pass after the first runs in
cache.
"""

from __future__ import annotations

import functools
import math
from typing import Any

import numpy as np
from swarmnode.kernels import int8_native, lowrank, topk2
from swarmnode.kernels.codec_base import (
    CHUNK,
    DEFAULT_BLOCK,
    F16_MAX,
    I8_MAX,
    I8_MIN_AMAX,
    TOPK_BUCKET,
    Packed,
    Sparse,
    _check_vector,
    int8_layout,
    topk_buckets,
    topk_count,
)
from swarmnode.kernels.errors import ShapeError
from swarmnode.kernels.topk_select import top_k_indices

__all__ = [
    "CHUNK",
    "DEFAULT_BLOCK",
    "F16_MAX",
    "I8_MAX",
    "I8_MIN_AMAX",
    "TOPK_BUCKET",
    "Packed",
    "Sparse",
    "int8_layout",
    "topk_buckets",
    "topk_count",
]


@functools.cache
def _nk() -> Any:
    """NumKong, imported on first use (~0.1 s): a peer exchanging raw never pays for it."""
    import numkong

    return numkong


# --- fp16 ------------------------------------------------------------------------------------


def fp16_encode(x: np.ndarray, out: np.ndarray | None = None) -> Packed:
    """`compress_ref.fp16_encode`, per chunk: cast, and only where the cast made an Inf (a value
    past float16's range: rare) cast again from the saturated chunk. `out`: a float16 vector
    of x's size to write into (a reused one: no fresh pages)."""
    _check_vector(x)
    nk = _nk()
    out = np.empty(x.size, dtype=np.float16) if out is None else out
    for lo in range(0, x.size, CHUNK):
        h = out[lo : lo + CHUNK]
        nk.astype(x[lo : lo + CHUNK], "float16", out=h)
        mm = nk.minmax(h)  # ignores NaN (None if all are): a NaN stays NaN, like the reference
        if mm is not None and (mm[0] < -F16_MAX or mm[2] > F16_MAX):
            nk.astype(np.clip(x[lo : lo + CHUNK], -F16_MAX, F16_MAX), "float16", out=h)
    return Packed("fp16", x.size, {"values": out})


def fp16_decode(p: Packed, out: np.ndarray | None = None) -> np.ndarray:
    """Half -> float32 (exact); a payload with an Inf or NaN half is refused."""
    nk = _nk()
    h = p.parts["values"]
    out = np.empty(p.n, dtype=np.float32) if out is None else out
    for lo in range(0, p.n, CHUNK):
        # a sum of finite halves stays finite (NumKong sums in float32): Inf or NaN shows
        if not math.isfinite(nk.sum(h[lo : lo + CHUNK])):
            raise ShapeError("fp16 payload holds Inf or NaN")
        nk.astype(h[lo : lo + CHUNK], "float32", out=out[lo : lo + CHUNK])
    return out


# --- int8, blockwise -------------------------------------------------------------------------


# values in the tiled scale vector that int8 multiplies a chunk by: a chunk is read as
# (rows / k, k * groups) against its block scales repeated k times, not as (rows, groups)
# against them broadcast: numpy's broadcast multiply runs one inner loop per row of `groups`
# values and took twice as long as a multiply of two flat arrays. 16 Ki values (64 KiB, in
# L1/L2) measured best of 4 Ki, 16 Ki and 64 Ki (scripts/bench/exchange/codecs.py,
# docs/benchmarks.md).
_TILE = 1 << 14


def _tile_rows(groups: int, rows: int) -> int:
    """k: how many copies of a chunk's `groups` scales make its tile; k divides rows."""
    return math.gcd(rows, max(1, _TILE // groups))


def _check_block(block: int) -> None:
    if not (1 <= block <= CHUNK and block & (block - 1) == 0):
        raise ShapeError(f"int8 block must be a power of two in [1, {CHUNK}], got {block}")


# which int8 kernel runs: "auto" is the C kernel where it was built, else numpy; "c" and "numpy"
# pick one (tests and scripts/bench/exchange/codecs.py compare them in one process)
KERNELS = ("auto", "c", "numpy")


def _use_c(kernel: str) -> bool:
    if kernel not in KERNELS:
        raise ShapeError(f"int8 kernel must be one of {KERNELS}, got {kernel!r}")
    return kernel == "c" or (kernel == "auto" and int8_native.module() is not None)


def int8_encode(x: np.ndarray, block: int = DEFAULT_BLOCK, kernel: str = "auto") -> Packed:
    """`compress_ref.int8_encode`, bit for bit: the fused C kernel (kernels/_int8.c, one read of
    x per chunk) where it was built, else `_int8_encode_numpy`."""
    _check_vector(x)
    _check_block(block)
    q = np.empty(x.size, dtype=np.int8)
    scales = np.empty(-(-x.size // block), dtype=np.float32)
    if _use_c(kernel):
        int8_native.encode_into(x, block, scales, q)
    elif x.size:
        _int8_encode_numpy(x, block, scales, q)
    return Packed("int8", x.size, {"scales": scales, "q": q}, block=block)


def _int8_encode_numpy(x: np.ndarray, block: int, scales: np.ndarray, q: np.ndarray) -> None:
    """Per chunk: the column maxima and minima (max |x| is max(max, -min): two reductions that
    write nothing, where |x| then its maxima wrote and reread a scratch chunk), x times the
    tiled 127 / max|x|, and NumKong's cast to int8 (round to nearest even, saturating: the rint
    and the cast)."""
    nk = _nk()
    n = x.size
    g0, _ = int8_layout(min(CHUNK, n), block)  # the first chunk has the most groups
    scratch = np.empty(min(CHUNK, n + block), dtype=np.float32)
    pad = np.empty_like(scratch)
    neg_min, inv = np.empty(g0, dtype=np.float32), np.empty(g0, dtype=np.float32)
    tile = np.empty(max(_TILE, g0), dtype=np.float32)
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
        amax, mn, iv = scales[si : si + groups], neg_min[:groups], inv[:groups]
        si += groups
        v.max(axis=0, out=amax)
        v.min(axis=0, out=mn)
        np.negative(mn, out=mn)
        np.maximum(amax, mn, out=amax)
        # +0 where a block holds only zeros, one of them -0 (the reference's |x| makes it +0)
        np.abs(amax, out=amax)
        # a zero (or `I8_MIN_AMAX`-tiny) block gets 0: 0 * Inf = NaN casts to -128 in NumKong
        iv.fill(0)
        np.divide(np.float32(I8_MAX), amax, out=iv, where=amax >= I8_MIN_AMAX)
        np.divide(amax, np.float32(I8_MAX), out=amax)  # the scale, in place of max|x|
        w = _tile_rows(groups, rows) * groups
        np.copyto(tile[:w].reshape(-1, groups), iv)
        np.multiply(v.reshape(-1, w), tile[:w], out=scratch[:span].reshape(-1, w))
        nk.astype(scratch[:m], "int8", out=q[lo : lo + m])


def int8_decode(p: Packed, out: np.ndarray | None = None, kernel: str = "auto") -> np.ndarray:
    """`compress_ref.int8_decode`, bit for bit: the C kernel (one pass) where it was built, else
    `_int8_decode_numpy`."""
    _check_block(p.block)
    out = np.empty(p.n, dtype=np.float32) if out is None else out
    if _use_c(kernel):
        int8_native.decode_into(p.parts["q"], p.parts["scales"], p.block, out)
    elif p.n:
        _int8_decode_numpy(p, out)
    return out


def _int8_decode_numpy(p: Packed, out: np.ndarray) -> None:
    """Per chunk: NumKong's cast to float32 straight into `out`, then one in-place multiply by
    the chunk's tiled scales (`_TILE`)."""
    n, block = p.n, p.block
    nk = _nk()
    q, scales = p.parts["q"], p.parts["scales"]
    g0, _ = int8_layout(min(CHUNK, n), block)
    pad = np.empty(min(CHUNK, n + block), dtype=np.float32)
    tile = np.empty(max(_TILE, g0), dtype=np.float32)
    si = 0
    for lo in range(0, n, CHUNK):
        m = min(CHUNK, n - lo)
        groups, rows = int8_layout(m, block)
        span = rows * groups
        w = _tile_rows(groups, rows) * groups
        np.copyto(tile[:w].reshape(-1, groups), scales[si : si + groups])
        si += groups
        dst = out[lo : lo + m] if span == m else pad[:span]
        nk.astype(q[lo : lo + m], "float32", out=dst[:m])
        dst[m:span] = 0
        d2 = dst.reshape(-1, w)
        np.multiply(d2, tile[:w], out=d2)
        if span != m:
            out[lo : lo + m] = pad[:m]


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
    """The k values of largest magnitude: `counts` (uint32, kept indices per bucket of 65536
    values), `lo` (uint16, each index within its bucket, increasing), `values` (their fp16,
    saturated). 4 bytes per kept value, where uint32 indices and float32 values took 8: the
    error feedback carries what fp16 rounds off, like what topk leaves out."""
    _check_vector(x)
    n = x.size
    k = topk_count(n, ratio)
    if k == n:
        idx = np.arange(n, dtype=np.int64)
    else:
        idx = top_k_indices(np.abs(x), k)  # a sampled threshold first (kernels/topk_select.py)
        idx.sort()
    counts = np.bincount(idx // TOPK_BUCKET, minlength=topk_buckets(n)).astype(np.uint32)
    lo = (idx & (TOPK_BUCKET - 1)).astype(np.uint16)
    values = fp16_encode(x[idx]).parts["values"]
    return Packed("topk", n, {"counts": counts, "lo": lo, "values": values}, k=k)


def topk_indices(p: Packed) -> np.ndarray:
    """The kept indices (int64) from `counts` and `lo`; the caller has checked that the counts
    add up to k (so this allocates k values, whatever the counts say)."""
    counts = p.parts["counts"]
    base = np.arange(counts.size, dtype=np.int64) * TOPK_BUCKET
    return np.repeat(base, counts.astype(np.int64)) + p.parts["lo"]


def topk_decode(p: Packed, out: np.ndarray | None = None) -> np.ndarray:
    out = np.empty(p.n, dtype=np.float32) if out is None else out
    out.fill(0.0)
    s = topk_sparse(p)
    out[s.idx] = s.values
    return out


def topk_sparse(p: Packed) -> Sparse:
    """The kept (indices, float32 values) without the dense vector: a receiver adds them to its
    reference copy in O(k) (`gossip.exchange.refs`), where the decode wrote and reread n zeros."""
    values = fp16_decode(Packed("fp16", p.k, {"values": p.parts["values"]}))
    return Sparse(p.n, topk_indices(p), values)


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
    if name == "topk2":
        try:
            density = float(arg)
        except ValueError:
            raise ShapeError(
                f"topk2 needs a density in (0, 0.5], as topk2:0.03; got {spec!r}"
            ) from None
        topk2.chunk_keep(density)
        return name, density
    if name == "lowrank":
        if not arg.isdigit():
            raise ShapeError(f"lowrank needs a whole rank, as lowrank:8; got {spec!r}")
        return name, float(lowrank.check_rank(int(arg)))
    raise ShapeError(
        f"unknown codec {spec!r} (expected none, fp16, int8, topk:RATIO, topk2:DENSITY or "
        "lowrank:RANK)"
    )


def encode(
    x: Any,
    codec: str,
    ratio: float = 0.0,
    block: int = DEFAULT_BLOCK,
    *,
    segs: lowrank.Segs = (),
    warm: dict[int, Any] | None = None,
    out: Any = None,
) -> Packed:
    """Encode with the numpy reference, or the cupy twin for a device array. lowrank takes the
    rank as `ratio`, the model's `segs` and its caller's `warm` state (kernels/lowrank.py);
    fp16 writes into `out` where given (ignored by the other codecs)."""
    from swarmnode.kernels.backend import is_device_array

    if codec == "lowrank":  # one backend-generic implementation
        return lowrank.encode(x, segs or ((1, x.size),), int(ratio), warm)
    if codec == "topk2":  # numpy only: a frame's worth of work, on the host
        from swarmnode.kernels.backend import to_numpy

        return topk2.encode(to_numpy(x), ratio)
    if is_device_array(x):
        from swarmnode.kernels import compress_cuda

        return compress_cuda.encode(x, codec, ratio, block)
    if codec == "fp16":
        return fp16_encode(x, out)
    if codec == "int8":
        return int8_encode(x, block)
    if codec == "topk":
        return topk_encode(x, ratio)
    raise ShapeError(f"no encoder for codec {codec!r}")


DECODERS = {
    "fp16": fp16_decode,
    "int8": int8_decode,
    "topk": topk_decode,
    "topk2": topk2.decode,
}


def sparse(p: Packed) -> Sparse:
    """A sparse codec's (places, values) without the dense vector: topk or topk2."""
    if p.codec == "topk2":
        return topk2.sparse_of(p)
    return topk_sparse(p)


def decode(p: Packed, out: Any = None) -> Any:
    """Decode a Packed into a float32 vector (numpy parts -> numpy; cupy parts -> cupy)."""
    from swarmnode.kernels.backend import is_device_array

    if p.codec == "lowrank":  # backend-generic
        return lowrank.decode(p, out)
    if any(is_device_array(v) for v in p.parts.values()):
        from swarmnode.kernels import compress_cuda

        return compress_cuda.decode(p, out)
    if p.codec not in DECODERS:
        raise ShapeError(f"no decoder for codec {p.codec!r}")
    return DECODERS[p.codec](p, out)
