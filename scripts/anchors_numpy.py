"""The `aggregate-numpy` group of scripts/bench_anchors.py: mean, median and trimmed mean against
ByzFL's recipes written in plain numpy, with the code they replaced as "before" rows, and each
result checked against the anchor's within the stated tolerance (see that script's doc)."""

from __future__ import annotations

import argparse
import functools
from typing import Any

from bench_anchors import Timed, _rows, _sizes, compare


def bench_aggregate_numpy(args: argparse.Namespace) -> None:
    import numpy as np
    from swarmnode.gossip.robust import fast as aggregate_fast
    from swarmnode.gossip.robust.aggregate import RULES

    d = int(args.d)
    for n, f in _sizes(args):
        X = _rows(n, d)
        print(f"aggregation vs plain numpy: n={n} d={d} f={f} float32")

        def np_mean(X: Any = X) -> Any:  # ByzFL's Average
            return np.mean(X, axis=0)

        def np_median(X: Any = X) -> Any:  # ByzFL's Median
            return np.median(X, axis=0)

        def np_trimmed(X: Any = X, n: int = n, f: int = f) -> Any:  # ByzFL's TrMean
            return np.mean(np.sort(X, axis=0)[f : n - f], axis=0)

        cases: list[tuple[str, Timed, Timed]] = [
            ("mean, before (float64 sums)", lambda X=X: _mean_before(X), np_mean),
            ("mean", lambda X=X, f=f: RULES["mean"](X, f), np_mean),
        ]
        for rule, anchor in (("median", np_median), ("trimmed-mean", np_trimmed)):
            ours = functools.partial(RULES[rule], X, f)
            if n <= aggregate_fast.NETWORK_MAX_ROWS:
                cases.append((f"{rule}, before (per-column sorts)", _without_network(ours), anchor))
            cases.append((rule, ours, anchor))
        for label, ours, anchor in cases:
            compare(label, ours, anchor, args.repeats)
            print(f"{'':<4}{_agreement(label, X, f, ours(), anchor())}")


def _without_network(fn: Timed) -> Timed:
    """fn with the sorted rules' min/max network off: the per-column sorts they used before."""
    from swarmnode.gossip.robust import fast as aggregate_fast

    def run() -> Any:
        saved = aggregate_fast.NETWORK_MAX_ROWS
        aggregate_fast.NETWORK_MAX_ROWS = 0
        try:
            return fn()
        finally:
            aggregate_fast.NETWORK_MAX_ROWS = saved

    return run


def _agreement(label: str, X: Any, f: int, ours: Any, anchor: Any) -> str:
    """Check `ours` against the anchor's result within the stated tolerance; say how close."""
    import numpy as np

    u = 2.0**-24
    n = X.shape[0]
    if label.startswith("mean"):
        exact, sum_abs = _exact_column_sums(X)
        exact /= n
        bound = ((n - 1) * u * sum_abs / n) * (1 + u) + u * np.abs(exact)
        err = np.abs(ours.astype(np.float64) - exact) / bound
        err_anchor = np.abs(anchor.astype(np.float64) - exact) / bound
        ok = err.max() <= 1 and err_anchor.max() <= 1
        return (
            f"{'ok' if ok else 'MISMATCH'}: |error| / np.mean's bound, max {err.max():.3f}"
            f" (np.mean {err_anchor.max():.3f}), mean {err.mean():.4f}"
            f" (np.mean {err_anchor.mean():.4f})"
        )
    if label.startswith("median"):
        ok = bool(np.array_equal(ours, anchor))
        return f"{'ok' if ok else 'MISMATCH'}: equal to np.median"
    # trimmed mean: ours sums the middle values in float64, np.mean in float32 (naive)
    m = n - 2 * f
    middle_abs = np.abs(np.sort(X[:, : min(X.shape[1], 200_000)], axis=0)[f : n - f])
    cols = middle_abs.shape[1]
    tol = (m - 1) * u * middle_abs.sum(axis=0, dtype=np.float64) / m * 1.0001
    tol += 2 * np.spacing(np.abs(anchor[:cols]))
    diff = np.abs(ours[:cols].astype(np.float64) - anchor[:cols])
    ok = bool((diff <= tol).all())
    return (
        f"{'ok' if ok else 'MISMATCH'}: |ours - anchor| / (anchor's float32 bound + 2 ulp),"
        f" max {(diff / tol).max():.3f} (first {cols} columns)"
    )


def _exact_column_sums(X: Any) -> tuple[Any, Any]:
    """float64 column sums of X and of |X|, by blocks: float64 sums of float32 values are exact
    to ~n * 2**-53 of sum|x|, far below the float32 bound they check."""
    import numpy as np

    d = X.shape[1]
    sums, sum_abs = np.empty(d), np.empty(d)
    for start in range(0, d, 1 << 16):
        B = X[:, start : start + (1 << 16)].astype(np.float64)
        sums[start : start + B.shape[1]] = B.sum(axis=0)
        sum_abs[start : start + B.shape[1]] = np.abs(B).sum(axis=0)
    return sums, sum_abs


def _mean_before(X: Any) -> Any:
    """The mean before issue 12's float32 change (commit 7ebe1a9), on clean float32 rows: float64
    column sums, two rows at a time (a halving tree) per column block of 2**17 elements, proved
    finite, divided in float64 and rounded to float32. Kept as the benchmark's baseline."""
    import numpy as np
    from swarmnode.gossip.robust.fast import _pairwise_row_sum  # still the cupy path's sum

    n, d = X.shape
    out = np.empty(d, dtype=np.float64)
    width = max(1, (1 << 17) // n)
    for start in range(0, d, width):
        out[start : start + width] = _pairwise_row_sum(X[:, start : start + width], np)
    if not np.isfinite(out).all():
        raise ValueError("the baseline is for clean rows only")
    return (out / n).astype(X.dtype)
