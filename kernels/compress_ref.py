"""The plain numpy definitions of the fp16 and int8 codecs: what `compress` (the fast CPU path)
and `compress_cuda` (the cupy twin) must compute, bit for bit. Slow on purpose (whole-vector
passes, numpy's own scalar float16 cast): tests and the GPU parity test compare against these.
"""

from __future__ import annotations

import numpy as np
from swarmnode.kernels.codec_base import (
    CHUNK,
    DEFAULT_BLOCK,
    F16_MAX,
    I8_MAX,
    I8_MIN_AMAX,
    Packed,
    _check_vector,
    int8_layout,
)
from swarmnode.kernels.errors import ShapeError


def fp16_encode(x: np.ndarray) -> Packed:
    """IEEE half, round to nearest even, of the input saturated to +-65504."""
    _check_vector(x)
    return Packed("fp16", x.size, {"values": np.clip(x, -F16_MAX, F16_MAX).astype(np.float16)})


def fp16_decode(p: Packed) -> np.ndarray:
    h = p.parts["values"]
    if not np.isfinite(h).all():
        raise ShapeError("fp16 payload holds Inf or NaN")
    return h.astype(np.float32)


def int8_encode(x: np.ndarray, block: int = DEFAULT_BLOCK) -> Packed:
    """Per chunk of CHUNK values read as a (rows, groups) matrix (`int8_layout`, zero-padded):
    scale = max|x| / 127 per column, q = rint(x * (127 / max|x|)); q = 0 in a column whose
    max|x| is 0 or below `I8_MIN_AMAX` (127 / max|x| would be Inf)."""
    _check_vector(x)
    n = x.size
    q, scales = np.empty(n, np.int8), []
    for lo in range(0, n, CHUNK):
        m = min(CHUNK, n - lo)
        groups, rows = int8_layout(m, block)
        v = np.zeros(rows * groups, np.float32)
        v[:m] = x[lo : lo + m]
        v = v.reshape(rows, groups)
        amax = np.abs(v).max(axis=0)
        inv = np.zeros_like(amax)
        np.divide(np.float32(I8_MAX), amax, out=inv, where=amax >= I8_MIN_AMAX)
        scales.append((amax / np.float32(I8_MAX)).astype(np.float32))
        q[lo : lo + m] = np.rint(v * inv).reshape(-1)[:m].astype(np.int8)
    flat = np.concatenate(scales) if scales else np.zeros(0, np.float32)
    return Packed("int8", n, {"scales": flat, "q": q}, block=block)


def int8_decode(p: Packed) -> np.ndarray:
    n, block = p.n, p.block
    q, scales = p.parts["q"], p.parts["scales"]
    out = np.empty(n, np.float32)
    si = 0
    for lo in range(0, n, CHUNK):
        m = min(CHUNK, n - lo)
        groups, rows = int8_layout(m, block)
        v = np.zeros(rows * groups, np.float32)
        v[:m] = q[lo : lo + m]
        out[lo : lo + m] = (v.reshape(rows, groups) * scales[si : si + groups]).reshape(-1)[:m]
        si += groups
    return out
