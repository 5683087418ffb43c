"""Fast paths of the coordinate-wise rules: no NaN/Inf pre-pass when every row is finite.

Used by `swarmnode.gossip.aggregate`; each result equals the plain path's (tests/gossip/test_aggregate_fast_paths.py).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

#
# The pre-pass (`finite_rows`, one float64 row-sum pass over the whole matrix) cost as much as a
# mean itself. Each rule below first runs on all rows and proves from its own intermediate result
# that no row holds NaN/Inf; only when that proof fails does it fall back to the pre-pass and
# rerun on the finite rows, so non-finite rows are still never used.

SUM_BLOCK_ELEMENTS = 1 << 17  # (rows x columns) per block of the float64 sums: stays in L2
SORT_BLOCK_ELEMENTS = 1 << 20  # (rows x columns) per transposed block of the sorted rules


def _column_sums(X: Any, xp: Any) -> Any:
    """float64 column sums of a float32 X, or None for float64 input (which takes the old path).

    A float64 sum of float32 values cannot overflow (3.4e38 * 1e9 < 1.8e308) and NaN or +-Inf
    propagates into it, so all-finite sums prove all-finite rows. float64 input could overflow
    to a non-finite sum from finite rows; it keeps the pre-pass.
    """
    if X.dtype != xp.float32:
        return None
    d = X.shape[1]
    out = xp.empty(d, dtype=xp.float64)
    width = max(1, SUM_BLOCK_ELEMENTS // X.shape[0])
    for start in range(0, d, width):
        stop = min(d, start + width)
        out[start:stop] = _pairwise_row_sum(X[:, start:stop], xp)
    return out


def _pairwise_row_sum(B: Any, xp: Any) -> Any:
    """Sum of B's rows in float64 by halving: log2(n) 2-D adds instead of n 1-D ones.

    The first add casts to float64 inside the ufunc (no separate float64 copy of B); the rest
    work in place on a block small enough to stay in cache.
    """
    m = B.shape[0]
    if m == 1:
        return B[0].astype(xp.float64)
    h = m // 2
    S = xp.add(B[:h], B[h : 2 * h], dtype=xp.float64)
    if m % 2:
        S[0] += B[2 * h]
    while h > 1:
        r, h = h, h // 2
        S[:h] += S[h : 2 * h]
        if r % 2:
            S[0] += S[2 * h]
    return S[0]


def _all_finite_or_none(X: Any, xp: Any, sums: Any) -> Any:
    """`sums` when it exists and is finite everywhere (so X has no NaN/Inf), else None."""
    if sums is None or not bool(xp.isfinite(sums).all()):
        return None
    return sums


def _sorted_columns(
    X: Any, idx: np.ndarray | None, xp: Any, pick: Callable[[Any, Any], Any]
) -> Any:
    """pick(T) for T = each column block of X[idx], transposed to (columns, rows) and sorted.

    Transposing a block into a contiguous (w, n) copy first makes every sort a contiguous row
    of n values; sorting the (n, w) block along axis 0 instead gathers each column at a stride
    of w floats, which was ~3x slower. With idx None all rows are used and the result is None
    if any of them holds NaN/Inf.
    """
    d = X.shape[1]
    n = X.shape[0] if idx is None else idx.size
    out = xp.empty(d, dtype=X.dtype)
    rows = None if idx is None else (xp.asarray(idx) if xp is not np else idx)
    width = max(1, SORT_BLOCK_ELEMENTS // max(1, n))
    bad = 0
    for start in range(0, d, width):
        stop = min(d, start + width)
        B = X[:, start:stop] if rows is None else X[rows, start:stop]
        T = xp.ascontiguousarray(B.T)
        T.sort(axis=1)
        if rows is None:  # summed on the device; one sync at the end, not one per block
            bad = bad + (~xp.isfinite(T[:, 0])).sum() + (~xp.isfinite(T[:, -1])).sum()
        out[start:stop] = pick(T, xp)
    if rows is None and int(bad):
        return None
    return out


def _median_of_sorted(T: Any, xp: Any) -> Any:
    """Row medians of a row-sorted T; the two middle values of an even count averaged in float64."""
    k = T.shape[1]
    if k % 2:
        return T[:, k // 2]
    return (T[:, k // 2 - 1].astype(xp.float64) + T[:, k // 2]) / 2
