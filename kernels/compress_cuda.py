"""The cupy twins of `swarmnode.kernels.compress`: same values, same order, on the device.

fp16 and int8 are one fused ElementwiseKernel each (saturate + cast; scale + round + cast); the
int8 block maxima are one cupy reduction. topk uses cupy's argpartition and the fp16 kernel for its values. The numpy definitions
are in compress_ref.py; tests/kernels/test_compress_gpu_parity.py compares both on random vectors. cupy is
imported inside the functions only, so this module imports on a machine without it.
"""

from __future__ import annotations

import functools
from typing import Any

from swarmnode.kernels.codec_base import (
    CHUNK,
    F16_MAX,
    I8_MAX,
    I8_MIN_AMAX,
    TOPK_BUCKET,
    Packed,
    _check_vector,
    int8_layout,
    topk_buckets,
    topk_count,
)
from swarmnode.kernels.errors import ShapeError

# compress_ref.fp16_encode: IEEE round to nearest even of the saturated value, as numpy's cast
_F16_SRC = "y = __half_as_ushort(__float2half_rn(fminf(fmaxf(x, -lim), lim)));"


@functools.cache
def _f16_kernel() -> Any:
    import cupy as cp

    return cp.ElementwiseKernel(
        "float32 x, float32 lim",
        "uint16 y",
        _F16_SRC,
        "swarmnode_f16_saturate",
        preamble="#include <cuda_fp16.h>",
    )


# the scale of value i: chunk c = i / chunk, group (i % chunk) % groups of that chunk
# (compress.int8_layout): full chunks have `gf` groups, the short last one `gt`
_I8_INDEX = """
    long long c = i / chunk;
    long long g = (c < nfull) ? gf : gt;
    long long si = c * gf + (i % chunk) % g;
"""


@functools.cache
def _i8_kernel() -> Any:
    import cupy as cp

    return cp.ElementwiseKernel(
        "raw float32 x, raw float32 inv, int64 chunk, int64 nfull, int64 gf, int64 gt",
        "int8 q",
        _I8_INDEX + "q = (signed char)rintf(x[i] * inv[si]);",
        "swarmnode_i8_quantize",
    )


@functools.cache
def _i8_decode_kernel() -> Any:
    import cupy as cp

    return cp.ElementwiseKernel(
        "raw int8 q, raw float32 scales, int64 chunk, int64 nfull, int64 gf, int64 gt",
        "float32 y",
        _I8_INDEX + "y = (float)q[i] * scales[si];",
        "swarmnode_i8_dequantize",
    )


def _i8_geometry(n: int, block: int) -> tuple[int, int, int, int, int]:
    """(nfull, gf, rows_f, gt, rows_t): full chunks and their layout, then the short one's."""
    nfull = n // CHUNK
    gf, rows_f = int8_layout(CHUNK, block)
    tail = n - nfull * CHUNK
    gt, rows_t = int8_layout(tail, block) if tail else (0, 0)
    return nfull, gf, rows_f, gt, rows_t


def block_amax(x: Any, block: int) -> Any:
    """max |x| per block, in the order of compress.int8_layout's scales."""
    import cupy as cp

    n = x.size
    nfull, gf, rows_f, gt, rows_t = _i8_geometry(n, block)
    parts = []
    if nfull:
        full = cp.abs(x[: nfull * CHUNK]).reshape(nfull, rows_f, gf)
        parts.append(full.max(axis=1).reshape(-1))
    if gt:
        tail = cp.zeros(rows_t * gt, dtype=cp.float32)
        tail[: n - nfull * CHUNK] = cp.abs(x[nfull * CHUNK :])
        parts.append(tail.reshape(rows_t, gt).max(axis=0))
    return cp.concatenate(parts) if parts else cp.zeros(0, cp.float32)


def encode(x: Any, codec: str, ratio: float = 0.0, block: int = 256) -> Packed:
    import cupy as cp

    _check_vector(x)
    n = x.size
    if codec == "fp16":
        out = cp.empty(n, dtype=cp.uint16)
        _f16_kernel()(x, cp.float32(F16_MAX), out)
        return Packed("fp16", n, {"values": out.view(cp.float16)})
    if codec == "int8":
        amax = block_amax(x, block)
        scale = (amax / cp.float32(I8_MAX)).astype(cp.float32)
        ok = amax >= cp.float32(I8_MIN_AMAX)  # compress_ref.int8_encode: q = 0 below it
        inv = cp.where(ok, cp.float32(I8_MAX) / cp.where(ok, amax, 1), 0)
        q = cp.empty(n, dtype=cp.int8)
        nfull, gf, _, gt, _ = _i8_geometry(n, block)
        _i8_kernel()(x, inv.astype(cp.float32), CHUNK, nfull, gf, gt, q)
        return Packed("int8", n, {"scales": scale, "q": q}, block=block)
    if codec == "topk":  # compress.topk_encode's layout
        k = topk_count(n, ratio)
        if k == n:
            idx = cp.arange(n, dtype=cp.int64)
        else:
            idx = cp.sort(cp.argpartition(cp.abs(x), n - k)[n - k :]).astype(cp.int64)
        counts = cp.bincount(idx // TOPK_BUCKET, minlength=topk_buckets(n)).astype(cp.uint32)
        lo = (idx % TOPK_BUCKET).astype(cp.uint16)
        values = encode(cp.ascontiguousarray(x[idx]), "fp16").parts["values"]
        return Packed("topk", n, {"counts": counts, "lo": lo, "values": values}, k=k)
    raise ShapeError(f"no encoder for codec {codec!r}")


def decode(p: Packed, out: Any = None) -> Any:
    import cupy as cp

    out = cp.empty(p.n, dtype=cp.float32) if out is None else out
    if p.codec == "fp16":
        h = p.parts["values"]
        if bool(cp.any((h.view(cp.uint16) & 0x7C00) == 0x7C00)):
            raise ShapeError("fp16 payload holds Inf or NaN")
        out[...] = h
    elif p.codec == "int8":
        nfull, gf, _, gt, _ = _i8_geometry(p.n, p.block)
        _i8_decode_kernel()(p.parts["q"], p.parts["scales"], CHUNK, nfull, gf, gt, out)
    elif p.codec == "topk":
        out.fill(0)
        ends = cp.cumsum(p.parts["counts"].astype(cp.int64))  # bucket of each kept value:
        bucket = cp.searchsorted(ends, cp.arange(p.k), side="right")  # no cupy repeat by array
        idx = bucket * TOPK_BUCKET + p.parts["lo"].astype(cp.int64)
        out[idx] = decode(Packed("fp16", p.k, {"values": p.parts["values"]}))
    else:
        raise ShapeError(f"no decoder for codec {p.codec!r}")
    return out
