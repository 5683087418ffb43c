"""The k largest of n magnitudes, without a full selection over all n.

`np.argpartition` over a whole model is nearly all of a topk frame's encoding, and a peer
encodes several frames per group round; most of that work orders values nobody keeps (figures:
docs/benchmarks.md, "Codecs" and "Network lab"). So: estimate the k-th largest magnitude from a
strided sample, keep every index at or above a threshold a little below that estimate (one
vectorised pass), and select the k largest among those candidates only (~1.3 k values).

It returns exactly a top-k set, or falls back to the full selection: every non-candidate is
below the threshold, hence below every candidate, so the k largest candidates are the k
largest overall. The fallback runs when the sample misjudged (fewer than k candidates), when
the sample holds a NaN, and when the boundary is tied (the k-th and the (k+1)-th largest
candidates equal: which of them is kept is then the full selection's choice, as before).
"""

from __future__ import annotations

import numpy as np

MIN_N = 1 << 16  # below this a full selection is as fast
MAX_RATIO = 0.25  # above this most values are kept: the candidates would be most of them
STRIDE = 97  # sample every 97th value (prime: no period of a layer's shape lines up with it)
SLACK = 1.3  # candidates aimed for, as a multiple of k: a sample's quantile errs by a few %


def top_k_indices(a: np.ndarray, k: int) -> np.ndarray:
    """Indices of the k largest values of `a` (1-D, no order), 0 < k < a.size."""
    n = a.size
    if n < MIN_N or k > MAX_RATIO * n:
        return _full(a, k)
    sample = a[::STRIDE]
    want = min(sample.size - 1, int(SLACK * k * sample.size / n) + 1)
    threshold = np.partition(sample, sample.size - want)[sample.size - want]
    if np.isnan(threshold) or np.isnan(sample).any():
        return _full(a, k)
    cand = np.flatnonzero(a >= threshold)
    if cand.size < k:
        return _full(a, k)
    if cand.size == k:
        return cand
    vals = a[cand]
    part = np.argpartition(vals, cand.size - k)
    kept, rest = part[cand.size - k :], part[: cand.size - k]
    if vals[rest].max() >= vals[kept].min():  # a tie at the boundary: the full selection decides
        return _full(a, k)
    return cand[kept]


def _full(a: np.ndarray, k: int) -> np.ndarray:
    return np.argpartition(a, a.size - k)[a.size - k :]
