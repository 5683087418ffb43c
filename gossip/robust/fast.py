"""Fast paths of the coordinate-wise rules: no NaN/Inf pre-pass when every row is finite.

Used by `swarmnode.gossip.robust.aggregate`; the sorted rules equal the plain path's results and the
mean stays within np.mean's float32 error bound (tests/gossip/robust/test_aggregate_fast_paths.py,
tests/gossip/robust/test_aggregate_mean.py).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import numpy as np

#
# The pre-pass (`finite_rows`, one float64 row-sum pass over the whole matrix) cost as much as a
# mean itself. Each rule below first runs on all rows and proves from its own intermediate result
# that no row holds NaN/Inf; only when that proof fails does it fall back to the pre-pass and
# rerun on the finite rows, so non-finite rows are still never used.
#
# The mean of float32 numpy rows is one BLAS sgemv, ones(n) @ X, accumulating in float32 as
# np.mean(X, axis=0) does (ByzFL's `Average`). The products x * 1 are exact, so each column is a
# float32 sum of its n values in the BLAS's order, and every order of an n-term sum obeys the same
# bound as np.mean's row-by-row one: |error| <= (n - 1) * u * sum_i |x_i| (u = 2**-24, to first
# order), plus one rounding u * |mean| for the division by n. OpenBLAS's kernels keep several
# partial sums, so in practice the error is smaller than np.mean's (measured max over columns,
# n = 64 near-identical rows: 2.9 against 7.5 u * mean|x|). A float32 pairwise tree (bound
# ceil(log2 n) * u) was measured too: it needs 2 log2(n) numpy calls per cache-sized block and
# reached only 0.8-0.9x np.mean's speed at n = 64, d = 1e6; the sgemv runs at 1.4-1.9x
# (docs/benchmarks.md).
#
# Finiteness: NaN or +-Inf in a column makes its sum NaN or +-Inf, so all-finite sums still prove
# all-finite rows. A float32 sum of finite values can overflow to +-Inf (rows near 3.4e38); that
# too reads as "not proven" and takes the pre-pass path, whose float64 mean of the finite rows is
# right for huge-but-finite rows. An overflow never comes back to a finite value (Inf + x is Inf
# or NaN), so a finite sum also means no partial sum overflowed.
#
# cupy arrays keep float64 pairwise column sums (`_column_sums`), and float64 input keeps the
# pre-pass; both as before.

SUM_BLOCK_ELEMENTS = 1 << 17  # (rows x columns) per block of the float64 sums: stays in L2
SORT_BLOCK_ELEMENTS = 1 << 20  # (rows x columns) per transposed block of the sorted rules
# Up to this many rows (numpy only) the sorted rules sort with a min/max network instead; see
# `_network_sorted_columns`. Trimmed mean at d = 1e6, one thread, against the transposed sorts
# (docs/benchmarks.md, two runs): 4.1x less time at n = 8, 1.3-2.3x at n = 16, ~1.5x
# at 24 (a separate measurement), none at 32.
NETWORK_MAX_ROWS = 24
NETWORK_BLOCK_ELEMENTS = 1 << 18  # (rows x columns) per block of the network: about L2


def _column_means(X: Any, xp: Any) -> Any:
    """Column means of X (X's dtype) when its own column sums prove every row finite, else None.

    None sends the caller to the pre-pass: float64 input, a NaN/Inf anywhere, or a float32 sum
    that overflowed. numpy float32 sums with sgemv in float32 (see the module comment); cupy
    float32 with `_column_sums` in float64.
    """
    if X.dtype != xp.float32:
        return None
    n = X.shape[0]
    if xp is np:
        with np.errstate(over="ignore", invalid="ignore"):  # expected: it sends us to the pre-pass
            sums = np.ones(n, dtype=np.float32) @ X
        if not np.isfinite(sums).all():
            return None
        sums /= np.float32(n)  # in place, correctly rounded
        return sums
    sums = _all_finite_or_none(X, xp, _column_sums(X, xp))
    return None if sums is None else (sums / n).astype(X.dtype)


def _column_sums(X: Any, xp: Any) -> Any:
    """float64 column sums of a float32 X, or None for float64 input (which takes the old path).

    The mean's path for cupy arrays only; numpy arrays sum with sgemv in `_column_means`.

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
    if xp is np and n <= NETWORK_MAX_ROWS:
        return _network_sorted_columns(X, idx, pick)
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


def _network_sorted_columns(
    X: np.ndarray, idx: np.ndarray | None, pick: Callable[[Any, Any], Any]
) -> Any:
    """`_sorted_columns` for few rows: each column block sorted by a min/max sorting network.

    A comparator is two whole-row ufuncs (np.minimum, np.maximum) over a block that stays in
    cache, so the cost per column is a few SIMD operations, where per-column sorts of n < ~30
    values pay a call each. Minimum and maximum are exact, so the sorted values, and with them
    the median and the trimmed mean, are those of np.sort (a -0.0 and a 0.0 may trade places).
    NaN propagates through both outputs of a comparator, and every input reaches the first
    output through some chain of comparators (or the network could not sort it to the front),
    so a NaN anywhere in a column leaves that column's first value NaN; -Inf sorts first and
    +Inf last. Checking the extremes therefore still proves the rows finite.
    """
    d = X.shape[1]
    n = X.shape[0] if idx is None else idx.size
    pairs = _sorting_network(n)
    out = np.empty(d, dtype=X.dtype)
    width = max(1, NETWORK_BLOCK_ELEMENTS // n)
    buf = np.empty((n + 1, min(width, d)), dtype=X.dtype)  # n wires and one spare row
    bad = False
    for start in range(0, d, width):
        stop = min(d, start + width)
        B = buf[:, : stop - start]
        B[:n] = X[:, start:stop] if idx is None else X[idx, start:stop]
        wire, spare = list(range(n)), n  # wire k's values live in row wire[k] of B
        for i, j in pairs:
            lo, hi = B[wire[i]], B[wire[j]]
            np.minimum(lo, hi, out=B[spare])
            np.maximum(lo, hi, out=hi)
            wire[i], spare = spare, wire[i]
        if idx is None:
            bad = bad or not (np.isfinite(B[wire[0]]).all() and np.isfinite(B[wire[-1]]).all())
        out[start:stop] = pick(B[wire].T, np)
    return None if bad else out


@functools.cache
def _sorting_network(n: int) -> tuple[tuple[int, int], ...]:
    """Comparators (i, j), i < j, of Batcher's odd-even merge sort for n wires (any n >= 1):
    19 for n = 8, 63 for 16, 132 for 24. tests/gossip/robust/test_aggregate_fast_paths.py checks that
    it sorts every 0/1 input (the 0-1 principle: then it sorts every input)."""
    pairs = []
    p = 1
    while p < n:
        k = p
        while k >= 1:
            for j in range(k % p, n - k, 2 * k):
                for i in range(min(k, n - j - k)):
                    if (i + j) // (2 * p) == (i + j + k) // (2 * p):
                        pairs.append((i + j, i + j + k))
            k //= 2
        p *= 2
    return tuple(pairs)


def _median_of_sorted(T: Any, xp: Any) -> Any:
    """Row medians of a row-sorted T; the two middle values of an even count averaged in float64."""
    k = T.shape[1]
    if k % 2:
        return T[:, k // 2]
    return (T[:, k // 2 - 1].astype(xp.float64) + T[:, k // 2]) / 2
