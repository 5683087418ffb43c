"""Distances and clipping between two 100 MB models without 100 MB temporaries.

Distances and norms of contiguous float32 vectors take one pass in NumKong's SIMD kernels
(`sqeuclidean`, `dot`: the difference and the sum in float64, the GIL released), several times
faster than the chunked numpy loop below, which stays for anything else (a strided view,
float64 input). Same results up to the order of the float64 summation, NaN and Inf alike
(tests/gossip/robust/test_chunked.py).

`other.astype(np.float64) - own` allocates two 200 MB float64 arrays (and `(own + diff)
.astype(np.float32)` two more): ~700 MB of fresh pages per pushed model, each page a fault on
first touch, which made bounding a push the largest span of a pushpull answer (figures:
docs/benchmarks-history.md, "Signing cost").

Here the same float64 arithmetic runs over cache-sized chunks (CHUNK elements: a 2 MB float64
scratch, allocated once per call): one read of both models for a distance, and one more, with a
single float32 output, for a clip. Results equal the whole-array computation's up to the order
of the float64 summation.
"""

from __future__ import annotations

import functools
import math
from typing import Any

import numpy as np

CHUNK = 1 << 18  # elements: 1 MB of each float32 input, 2 MB of float64 scratch


@functools.cache
def _nk() -> Any:
    """NumKong (a dependency: kernels/compress.py's codecs), imported on first use."""
    import numkong

    return numkong


def _simd(*xs: np.ndarray) -> bool:
    """Whether NumKong takes these: contiguous float32 numpy vectors."""
    return all(type(x) is np.ndarray and x.dtype == np.float32 and x.flags.c_contiguous for x in xs)


def distance(own: np.ndarray, other: np.ndarray) -> float:
    """|other - own| (float64 accumulation); NaN/Inf when either holds a non-finite value."""
    a, b = own.reshape(-1), other.reshape(-1)
    if a.shape != b.shape:
        raise ValueError(f"distance between {a.shape} and {b.shape} values")
    if _simd(a, b):
        return math.sqrt(float(_nk().sqeuclidean(a, b)))
    scratch = np.empty(min(CHUNK, a.size), dtype=np.float64)
    total = 0.0
    for lo in range(0, a.size, CHUNK):
        d = scratch[: min(CHUNK, a.size - lo)]
        np.subtract(b[lo : lo + CHUNK], a[lo : lo + CHUNK], out=d, dtype=np.float64)
        total += _sum_of_squares(d)
    return math.sqrt(total)


def norm(x: np.ndarray) -> float:
    """|x| (float64 accumulation), like `distance`."""
    a = x.reshape(-1)
    if _simd(a):
        return math.sqrt(float(_nk().dot(a, a)))
    scratch = np.empty(min(CHUNK, a.size), dtype=np.float64)
    total = 0.0
    for lo in range(0, a.size, CHUNK):
        d = scratch[: min(CHUNK, a.size - lo)]
        d[...] = a[lo : lo + CHUNK]
        total += _sum_of_squares(d)
    return math.sqrt(total)


def toward(own: np.ndarray, other: np.ndarray, scale: float) -> np.ndarray:
    """own + scale (other - own) as a new float32 vector (float64 arithmetic per chunk)."""
    a, b = own.reshape(-1), other.reshape(-1)
    out = np.empty(a.size, dtype=np.float32)
    scratch = np.empty(min(CHUNK, a.size), dtype=np.float64)
    for lo in range(0, a.size, CHUNK):
        d = scratch[: min(CHUNK, a.size - lo)]
        np.subtract(b[lo : lo + CHUNK], a[lo : lo + CHUNK], out=d, dtype=np.float64)
        d *= scale
        d += a[lo : lo + CHUNK]
        out[lo : lo + CHUNK] = d
    return out


def _sum_of_squares(d: np.ndarray) -> float:
    """sum(d * d), squaring `d` in place. Not np.dot/np.vdot: OpenBLAS's threaded ddot is many
    times slower per chunk on a small, loaded box than this pairwise sum."""
    np.multiply(d, d, out=d)
    return float(d.sum())
