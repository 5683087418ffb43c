"""mean, median and trimmed mean skip the NaN/Inf pre-pass when their own pass proves every row
finite, and sort transposed blocks. These tests hold them to the previous implementation (kept
below, as it was) on clean inputs and on inputs with non-finite values anywhere, with block sizes
small enough that a bad value shows up only in a late block. The mean of clean float32 rows now
sums in float32 as np.mean does, so there it is held to np.mean's error bound instead
(tests/gossip/robust/mean_bound.py; more in tests/gossip/robust/test_aggregate_mean.py).
"""

from __future__ import annotations

import numpy as np
import pytest
from swarmnode.gossip.errors import AggregationError
from swarmnode.gossip.robust import fast as aggregate_fast
from swarmnode.gossip.robust.aggregate import mean, median, trimmed_mean

from tests.gossip.robust.mean_bound import exact_mean, float32_mean_bound

pytestmark = pytest.mark.timeout(60)

# --- the previous implementation: pre-pass, then column blocks sorted along axis 0 -----------


def _finite(X: np.ndarray) -> np.ndarray:
    return X[np.isfinite(X.sum(axis=1, dtype=np.float64))]


def old_mean(X: np.ndarray, f: int) -> np.ndarray:
    return _finite(X).mean(axis=0, dtype=np.float64).astype(X.dtype)


def old_median(X: np.ndarray, f: int) -> np.ndarray:
    S = np.sort(_finite(X), axis=0)
    k = S.shape[0]
    if k % 2:
        return S[k // 2]
    return ((S[k // 2 - 1].astype(np.float64) + S[k // 2]) / 2).astype(X.dtype)


def old_trimmed_mean(X: np.ndarray, f: int) -> np.ndarray:
    S = np.sort(_finite(X), axis=0)
    return S[f : S.shape[0] - f].mean(axis=0, dtype=np.float64).astype(X.dtype)


RULES = [(mean, old_mean), (median, old_median), (trimmed_mean, old_trimmed_mean)]


def rows(rng: np.random.Generator, n: int, d: int, dtype: type, near: bool) -> np.ndarray:
    if near:  # peers' models: a shared base plus small noise
        base = rng.standard_normal(d)
        return (base + 1e-4 * rng.standard_normal((n, d))).astype(dtype)
    return (rng.standard_normal((n, d)) * rng.choice([1e-3, 1.0, 1e3], size=(n, 1))).astype(dtype)


@pytest.fixture(params=[True, False], ids=["small-blocks", "default-blocks"])
def blocks(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    if request.param:
        monkeypatch.setattr(aggregate_fast, "SUM_BLOCK_ELEMENTS", 40)
        monkeypatch.setattr(aggregate_fast, "SORT_BLOCK_ELEMENTS", 40)
        monkeypatch.setattr(aggregate_fast, "NETWORK_BLOCK_ELEMENTS", 40)


@pytest.mark.usefixtures("blocks")
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("near", [True, False])
@pytest.mark.parametrize("n", [1, 2, 5, 8, 13, 24, 25, 40])  # <= 24: sorting network; above: sorts
def test_clean_inputs_match_the_previous_implementation(n, near, dtype):
    rng = np.random.default_rng(n)
    X = rows(rng, n, 257, dtype, near)
    f = (n - 1) // 2
    np.testing.assert_array_equal(median(X, f), old_median(X, f))
    if dtype == np.float32:
        # float32 sums (one sgemv, as np.mean): the old float64 sums were within one float32
        # ulp of the exact mean, these are within np.mean's bound (n - 1) u sum|x_i| / n, which
        # on the rows at 1e-3 to 1e3 of near=False is many ulps of a small mean
        exact = exact_mean(X)
        err = np.abs(mean(X, f).astype(np.float64) - exact)
        assert (err <= float32_mean_bound(X, exact)).all()
    else:  # float64 rows keep the old path: the pre-pass, then row-by-row float64 sums
        np.testing.assert_array_max_ulp(mean(X, f), old_mean(X, f), maxulp=1)
    # float64 sums in another order, rounded once to the output dtype: at most one unit in the
    # last place apart, almost always none
    np.testing.assert_array_max_ulp(trimmed_mean(X, f), old_trimmed_mean(X, f), maxulp=1)


@pytest.mark.usefixtures("blocks")
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
@pytest.mark.parametrize(("rule", "old"), RULES)
@pytest.mark.parametrize("n", [7, 29])
def test_a_non_finite_value_anywhere_drops_its_row(rule, old, bad, dtype, n):
    rng = np.random.default_rng(7)
    for row, col in [(0, 0), (3, 256), (n - 1, 130), (2, 1)]:
        X = rows(rng, n, 257, dtype, near=True)
        X[row, col] = bad
        out = rule(X, 2)
        assert np.isfinite(out).all()
        _same_up_to_sum_order(out, old(X, 2))
        _same_up_to_sum_order(out, old(np.delete(X, row, axis=0), 2))


def _same_up_to_sum_order(out: np.ndarray, expected: np.ndarray) -> None:
    """float64 sums in another order: rounded once to float32, at most one ulp apart; left in
    float64, apart by their own rounding (at n = 29, up to 4 float64 ulps on these rows)."""
    if out.dtype == np.float32:
        np.testing.assert_array_max_ulp(out, expected, maxulp=1)
    else:
        np.testing.assert_allclose(out, expected, rtol=1e-14, atol=0)


@pytest.mark.parametrize("n", range(1, 21))
def test_the_sorting_network_sorts_every_0_1_input(n):
    """The 0-1 principle: a comparator network that sorts every 0/1 input sorts every input."""
    V = ((np.arange(2**n)[None, :] >> np.arange(n)[:, None]) & 1).astype(np.uint8)
    for i, j in aggregate_fast._sorting_network(n):
        V[i], V[j] = np.minimum(V[i], V[j]), np.maximum(V[i], V[j])
    assert (np.diff(V.astype(np.int8), axis=0) >= 0).all()


@pytest.mark.parametrize("n", [21, 22, 23, 24, 25, 33])
def test_the_sorting_network_sorts_random_columns(n):
    V = np.random.default_rng(n).integers(0, 4, size=(n, 100_000)).astype(np.int8)
    for i, j in aggregate_fast._sorting_network(n):
        V[i], V[j] = np.minimum(V[i], V[j]), np.maximum(V[i], V[j])
    assert (np.diff(V, axis=0) >= 0).all()


@pytest.mark.parametrize(("rule", "old"), RULES)
def test_rows_that_cancel_to_inf_in_float32_are_still_finite(rule, old):
    """float32 rows near the top of the range: their float64 sums do not overflow."""
    X = np.full((5, 9), 3e38, dtype=np.float32)
    X[::2] *= -1
    np.testing.assert_array_equal(rule(X, 1), old(X, 1))


@pytest.mark.parametrize(("rule", "name"), [(median, "median"), (trimmed_mean, "trimmed-mean")])
def test_too_few_finite_rows_still_names_the_dropped_rows(rule, name):
    X = np.ones((5, 10), dtype=np.float32)
    X[1, 3] = np.nan
    with pytest.raises(AggregationError, match=f"{name} with f=2 .* dropping 1 rows"):
        rule(X, 2)
