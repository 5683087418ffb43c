"""Distances and clipping between two 100 MB models without 100 MB temporaries.

`other.astype(np.float64) - own` allocates two 200 MB float64 arrays (and `(own + diff)
.astype(np.float32)` two more): ~700 MB of fresh pages per pushed model, each page a fault on
first touch. Measured in a `swarmnode start` node (25M parameters, load ~3): 414 ms mean for one
`PushGuard.bound`, the largest span of a pushpull answer (docs/benchmarks-history.md, "Signing
cost").

Here the same float64 arithmetic runs over cache-sized chunks (CHUNK elements: a 2 MB float64
scratch, allocated once per call): one read of both models for a distance, and one more, with a
single float32 output, for a clip. Results equal the whole-array computation's up to the order
of the float64 summation.
"""

from __future__ import annotations

import math

import numpy as np

CHUNK = 1 << 18  # elements: 1 MB of each float32 input, 2 MB of float64 scratch


def distance(own: np.ndarray, other: np.ndarray) -> float:
    """|other - own| (float64 accumulation); NaN/Inf when either holds a non-finite value."""
    a, b = own.reshape(-1), other.reshape(-1)
    if a.shape != b.shape:
        raise ValueError(f"distance between {a.shape} and {b.shape} values")
    scratch = np.empty(min(CHUNK, a.size), dtype=np.float64)
    total = 0.0
    for lo in range(0, a.size, CHUNK):
        d = scratch[: min(CHUNK, a.size - lo)]
        np.subtract(b[lo : lo + CHUNK], a[lo : lo + CHUNK], out=d, dtype=np.float64)
        total += _sum_of_squares(d)
    return math.sqrt(total)


def norm(x: np.ndarray) -> float:
    """|x| (float64 accumulation), chunked like `distance`."""
    a = x.reshape(-1)
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
    """sum(d * d), squaring `d` in place. Not np.dot/np.vdot: OpenBLAS's threaded ddot took
    ~6 ms per 2 MB chunk on this 2-core box under load (600-900 ms per 100 MB, against 40 ms
    for this pairwise sum, measured 2026-11-24)."""
    np.multiply(d, d, out=d)
    return float(d.sum())
