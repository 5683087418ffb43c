"""The mean of clean float32 rows sums in float32 (one BLAS sgemv, gossip/robust/fast.py), as
np.mean(X, axis=0) does. These tests hold it to np.mean's error bound against an exact
(math.fsum) reference on random and adversarial rows, and check that rows with NaN/Inf never
enter it, also when a float32 sum of huge but finite rows overflows and the float64 path takes
over.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from swarmnode.gossip.errors import AggregationError
from swarmnode.gossip.robust.aggregate import mean

from tests.gossip.robust.mean_bound import exact_mean, float32_mean_bound

pytestmark = pytest.mark.timeout(60)

D = 2000


def data(kind: str, n: int, d: int, rng: np.random.Generator) -> np.ndarray:
    if kind == "randn":
        X = rng.standard_normal((n, d))
    elif kind == "near":  # peers' models: a shared base plus small noise
        X = rng.standard_normal(d) + 1e-4 * rng.standard_normal((n, d))
    elif kind == "mixed":  # each row at its own scale, 1e-6 to 1e6
        X = rng.standard_normal((n, d)) * 10.0 ** rng.integers(-6, 7, size=(n, 1))
    elif kind == "cancel":  # pairs of rows at 1e6 that cancel down to O(1) honest noise
        X = rng.standard_normal((n, d))
        k = n // 2
        big = 1e6 * (1 + rng.standard_normal((k, d)))
        X[: 2 * k : 2] = big
        X[1 : 2 * k : 2] = -big + rng.standard_normal((k, d))
        X = X[rng.permutation(n)]
    elif kind == "positive":  # one sign throughout: where a row-by-row sum's error grows most
        X = rng.uniform(1, 2, (n, d))
    else:  # "huge": large enough that a few rows' sum nears float32's range, without overflowing
        X = rng.uniform(-1, 1, (n, d)) * 3e38 / n
    return X.astype(np.float32)


KINDS = ["randn", "near", "mixed", "cancel", "positive", "huge"]


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("n", [1, 2, 3, 8, 13, 16, 64])
def test_mean_is_within_np_means_float32_error(kind: str, n: int) -> None:
    X = data(kind, n, D, np.random.default_rng(n * 100 + KINDS.index(kind)))
    exact = exact_mean(X)
    bound = float32_mean_bound(X, exact)
    ours = mean(X)
    assert ours.dtype == np.float32 and ours.shape == (D,)
    assert np.isfinite(ours).all()
    err = np.abs(ours.astype(np.float64) - exact)
    err_np = np.abs(np.mean(X, axis=0).astype(np.float64) - exact)
    assert (err <= bound).all(), float((err / bound).max())
    assert (err_np <= bound).all()  # the bound is np.mean's own
    # and no worse than np.mean in practice: the mean error over 2000 columns, 25% slack for the
    # summation order (the BLAS keeps several partial sums; at n <= 8 it matches np.mean exactly)
    assert err.mean() <= 1.25 * err_np.mean()


def test_the_mean_of_one_row_is_that_row_in_a_new_array() -> None:
    X = np.random.default_rng(0).standard_normal((1, 300)).astype(np.float32)
    out = mean(X)
    np.testing.assert_array_equal(out, X[0])
    assert not np.shares_memory(out, X)


@pytest.mark.parametrize("layout", ["strided", "fortran"])
def test_non_contiguous_rows_are_within_the_bound(layout: str) -> None:
    X = data("mixed", 13, 2 * D, np.random.default_rng(3))
    X = X[:, ::2] if layout == "strided" else np.asfortranarray(X)
    exact = exact_mean(X)
    err = np.abs(mean(X).astype(np.float64) - exact)
    assert (err <= float32_mean_bound(X, exact)).all()


def test_no_columns() -> None:
    assert mean(np.empty((3, 0), dtype=np.float32)).shape == (0,)


# --- non-finite rows: the float32 sums prove nothing, the float64 path drops them -------------


def _finite_mean(X: np.ndarray) -> np.ndarray:
    """float64 mean of the rows without NaN/Inf, rounded once to X's dtype: the fallback's result."""
    keep = np.isfinite(X).all(axis=1)
    return X[keep].astype(np.float64).mean(axis=0).astype(X.dtype)


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
@pytest.mark.parametrize("n", [2, 3, 8, 13])
def test_rows_with_nan_or_inf_are_never_averaged_in(bad: float, n: int) -> None:
    rng = np.random.default_rng(n)
    for rows in ([0], [n - 1], [0, n - 1] if n > 2 else [1]):
        X = data("near", n, 301, rng)
        for r in rows:
            X[r, rng.integers(0, 301)] = bad
        out = mean(X)
        assert np.isfinite(out).all()
        np.testing.assert_array_max_ulp(out, _finite_mean(X), maxulp=1)
        np.testing.assert_array_max_ulp(out, _finite_mean(np.delete(X, rows, axis=0)), maxulp=1)


def test_inf_and_minus_inf_in_one_column_are_both_dropped() -> None:
    X = data("randn", 7, 50, np.random.default_rng(1))
    X[2, 10], X[5, 10] = np.inf, -np.inf  # their column sums to NaN, not to a finite value
    np.testing.assert_array_max_ulp(mean(X), _finite_mean(np.delete(X, [2, 5], axis=0)), maxulp=1)


@pytest.mark.parametrize("n", [1, 3])
def test_no_finite_row_is_an_error(n: int) -> None:
    X = np.ones((n, 10), dtype=np.float32)
    X[:, 4] = np.nan
    with pytest.raises(AggregationError, match="mean with f=0 needs at least 1 finite"):
        mean(X)


@pytest.mark.parametrize("with_nan_row", [False, True])
def test_huge_finite_rows_whose_float32_sum_overflows_are_still_averaged(
    with_nan_row: bool,
) -> None:
    X = np.full((5, 40), 3e38, dtype=np.float32)
    X[1] = 2e38
    X[3, ::2] = -3e38
    if with_nan_row:
        X[4, 7] = np.nan
    finite = X[np.isfinite(X).all(axis=1)]
    # the float32 column sums overflow (the fast path proves nothing and hands over) ...
    with np.errstate(over="ignore"):
        assert not np.isfinite(np.ones(len(finite), dtype=np.float32) @ finite).all()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the expected overflow is not the caller's business
        out = mean(X)
    # ... and the float64 path averages the finite rows exactly as before
    assert np.isfinite(out).all()
    np.testing.assert_array_equal(out, _finite_mean(X))


@pytest.mark.parametrize("n", [1, 2, 7])
def test_float64_rows_keep_float64(n: int) -> None:
    X = np.random.default_rng(n).standard_normal((n, 300)) * 10.0 ** np.arange(n)[:, None]
    out = mean(X)
    assert out.dtype == np.float64
    exact = exact_mean(X)
    bound = n * 2.0**-53 * np.abs(X).sum(axis=0) / n + 2.0**-53 * np.abs(exact)
    assert (np.abs(out - exact) <= bound).all()
    X[n - 1, 3] = np.nan
    if n > 1:
        np.testing.assert_array_max_ulp(mean(X), X[: n - 1].mean(axis=0), maxulp=1)
