"""Every aggregation rule against a slow float64 reference written as plainly as possible.

Inputs are drawn by hypothesis in three families: iid rows, rows with adversarial outliers, and
near-identical rows (a shared base plus noise at 1e-4 of its scale: what peers' models look
like, and where a naive Gram-trick Krum picks at random).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from swarmnode.gossip.errors import AggregationError
from swarmnode.gossip.robust.aggregate import RULES, krum_scores, krum_select, min_peers

from tests.gossip.robust.mean_bound import exact_mean, float32_mean_bound

FUZZ = settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])


# --- references: float64, loops, per-coordinate sorts --------------------------------------------


def _finite(X: np.ndarray) -> np.ndarray:
    return np.flatnonzero(np.isfinite(X).all(axis=1))


def ref_krum_scores(X: np.ndarray, f: int) -> np.ndarray:
    X = X.astype(np.float64)
    idx = _finite(X)
    scores = np.full(len(X), np.inf)
    for i in idx:
        dists = sorted(float(np.sum((X[i] - X[j]) ** 2)) for j in idx if j != i)
        scores[i] = sum(dists[: len(idx) - f - 2])
    return scores


def ref_mean(X: np.ndarray, f: int) -> np.ndarray:
    return exact_mean(X[_finite(X)])  # math.fsum: the mean's tolerance is its float32 error bound


def ref_median(X: np.ndarray, f: int) -> np.ndarray:
    rows = X[_finite(X)].astype(np.float64)
    out = []
    for c in range(X.shape[1]):
        col = sorted(rows[:, c])
        k = len(col)
        out.append(col[k // 2] if k % 2 else (col[k // 2 - 1] + col[k // 2]) / 2)
    return np.array(out)


def ref_trimmed_mean(X: np.ndarray, f: int) -> np.ndarray:
    rows = X[_finite(X)].astype(np.float64)
    return np.array([np.mean(sorted(rows[:, c])[f : len(rows) - f]) for c in range(X.shape[1])])


def ref_centered_clip(
    X: np.ndarray, f: int, tau: float | None = None, iters: int = 3
) -> np.ndarray:
    rows = X[_finite(X)].astype(np.float64)
    v = ref_median(X, f)
    for _ in range(iters):
        dist = np.array([np.sqrt(np.sum((x - v) ** 2)) for x in rows])
        t = np.median(dist) if tau is None else tau
        step = np.zeros_like(v)
        for x, dx in zip(rows, dist, strict=True):
            step += (x - v) * (min(1.0, t / dx) if dx > 0 else 1.0)
        v = v + step / len(rows)
    return v


# --- inputs ---------------------------------------------------------------------------------------


class Case(NamedTuple):
    X: np.ndarray  # (n, d) float32
    f: int
    kind: str  # iid | outliers | near
    honest: np.ndarray  # bool (n,): not one of the planted outliers


@st.composite
def updates(draw: st.DrawFn, min_n: int = 1) -> Case:
    n = draw(st.integers(min_n, 12))
    d = draw(st.integers(1, 40))
    f = draw(st.integers(0, 3))
    kind = draw(st.sampled_from(["iid", "outliers", "near"]))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    if kind == "near":
        X = rng.standard_normal(d) + 1e-4 * rng.standard_normal((n, d))
    else:
        X = rng.standard_normal((n, d))
    honest = np.ones(n, dtype=bool)
    if kind == "outliers":
        k = draw(st.integers(0, min(f, n)))
        bad = rng.choice(n, size=k, replace=False)
        X[bad] = draw(st.sampled_from([1e3, -1e4, 1e6])) * (1 + rng.standard_normal((k, d)))
        honest[bad] = False
    return Case(X.astype(np.float32), f, kind, honest)


def _tol(case: Case) -> float:
    """Absolute tolerance: 1e-6 of the honest rows' scale (O(1) here), never of the outliers'.

    Every rule but the mean accumulates in float64 and rounds once to float32, so its error is
    about one float32 ulp *of its own output* (what rtol covers) plus float64 rounding of the
    inputs (~1e-16 x 1e6 x n, far below this). The mean sums in float32 as np.mean does: it is
    held to that bound instead (`float32_mean_bound`), which scales with the outliers it averages. Scaling atol by the largest row, outliers included,
    gave atol ~1-30 on outputs of order 1 in the outlier family and hid any real error there.
    Only when every row is an outlier is the outliers' scale the honest one.
    """
    X = case.X
    rows = X[_finite(X)] if not case.honest.any() else X[case.honest & np.isfinite(X).all(axis=1)]
    return 1e-6 * float(np.abs(rows).max()) if rows.size else 0.0


def _expect_error_if_too_few(rule: str, X: np.ndarray, f: int) -> bool:
    if len(_finite(X)) >= min_peers(rule, f):
        return False
    with pytest.raises(AggregationError, match=f"f={f}"):
        RULES[rule](X, f)
    return True


# --- Krum --------------------------------------------------------------------------------------


@FUZZ
@given(case=updates())
def test_krum_scores_and_choice_match_the_reference(case: Case) -> None:
    X, f = case.X, case.f
    if _expect_error_if_too_few("krum", X, f):
        return
    ref = ref_krum_scores(X, f)
    ours = krum_scores(X, f)
    assert ours.dtype == np.float64 and ours.shape == (len(X),)
    np.testing.assert_allclose(ours, ref, rtol=1e-4)
    best = ref.min()
    chosen = krum_select(X, f)
    # The reference's index, up to exact-score ties (relative 1e-6: far below real gaps).
    assert ref[chosen] <= best * (1 + 1e-6) + 1e-30
    if np.sum(ref <= best * (1 + 1e-4)) == 1:
        assert chosen == int(np.argmin(ref))
    np.testing.assert_array_equal(RULES["krum"](X, f), X[chosen])


@FUZZ
@given(case=updates(min_n=5), m=st.integers(1, 12))
def test_multi_krum_averages_the_m_best_rows(case: Case, m: int) -> None:
    X, f = case.X, case.f
    if _expect_error_if_too_few("multi-krum", X, f):
        return
    ref = ref_krum_scores(X, f)
    m = min(m, len(X))
    order = np.argsort(ref, kind="stable")
    if m < len(X):  # the choice is only defined where the m-th and (m+1)-th scores differ
        assume(ref[order[m]] > ref[order[m - 1]] * (1 + 1e-4))
    expected = X[order[:m]].astype(np.float64).mean(axis=0)
    out = RULES["multi-krum"](X, f, m=m)
    assert out.dtype == np.float32
    np.testing.assert_allclose(out, expected, rtol=1e-6, atol=_tol(case))


def test_multi_krum_default_m_is_n_minus_f_and_bad_m_is_refused() -> None:
    X = np.random.default_rng(0).standard_normal((9, 5)).astype(np.float32)
    ref = ref_krum_scores(X, 2)
    expected = X[np.argsort(ref)[:7]].astype(np.float64).mean(axis=0)
    np.testing.assert_allclose(RULES["multi-krum"](X, 2), expected, rtol=1e-6)
    for bad in (0, 10, 2.5, True):
        with pytest.raises(AggregationError, match="m="):
            RULES["multi-krum"](X, 2, m=bad)


def test_krum_needs_n_greater_than_2f_plus_2_and_says_so() -> None:
    X = np.random.default_rng(0).standard_normal((6, 4)).astype(np.float32)
    with pytest.raises(AggregationError, match=r"f=2.*n=6"):
        krum_scores(X, 2)
    assert np.isfinite(krum_scores(np.vstack([X, X[:1]]), 2)).all()  # n = 7 = 2f + 3


def test_naive_gram_krum_picks_at_random_on_near_identical_rows() -> None:
    # Row 0 has half the noise of the others: the true Krum choice. With distances from the raw
    # Gram trick in float32 (what we must never do) the scores are rounding noise; ours are not.
    n, d, f = 16, 20_000, 3
    naive_right = ours_right = 0
    seeds = range(6)
    for seed in seeds:
        rng = np.random.default_rng(seed)
        noise = rng.standard_normal((n, d))
        noise[0] *= 0.5
        X = (rng.standard_normal(d) + 1e-4 * noise).astype(np.float32)
        truth = int(np.argmin(ref_krum_scores(X, f)))
        assert truth == 0
        G = (X @ X.T).astype(np.float64)
        naive_D = np.diagonal(G)[:, None] + np.diagonal(G)[None, :] - 2 * G
        np.fill_diagonal(naive_D, np.inf)
        naive_scores = np.sort(naive_D, axis=1)[:, : n - f - 2].sum(axis=1)
        naive_right += int(np.argmin(naive_scores)) == truth
        ours_right += krum_select(X, f) == truth
    assert ours_right == len(seeds)
    assert naive_right <= 2


# --- coordinate-wise rules -------------------------------------------------------------------------


@FUZZ
@given(case=updates())
@pytest.mark.parametrize(
    ("rule", "reference"),
    [("median", ref_median), ("trimmed-mean", ref_trimmed_mean), ("mean", ref_mean)],
)
def test_coordinate_rules_match_the_reference(rule: str, reference: object, case: Case) -> None:
    X, f = case.X, case.f
    if _expect_error_if_too_few(rule, X, f):
        return
    out = RULES[rule](X, f)
    assert out.shape == (X.shape[1],) and out.dtype == np.float32
    if rule == "mean":
        # float32 sums (np.mean's precision): with outliers at 1e6 every row's rounding is at
        # the outliers' scale, ~1e-7 x 1e6 absolute, which the honest-scale atol below cannot
        # cover (one case in ~100 of the outlier family failed it); the promise is the bound
        rows = X[_finite(X)]
        ref = reference(X, f)
        err = np.abs(out.astype(np.float64) - ref)
        assert (err <= float32_mean_bound(rows, ref)).all()
        return
    np.testing.assert_allclose(out, reference(X, f), rtol=1e-6, atol=_tol(case))


@FUZZ
@given(case=updates(), iters=st.integers(1, 4), tau=st.sampled_from([None, 0.1, 1.0, 10.0]))
def test_centered_clip_matches_the_reference(case: Case, iters: int, tau: float | None) -> None:
    X, f = case.X, case.f
    if _expect_error_if_too_few("centered-clip", X, f):
        return
    out = RULES["centered-clip"](X, f, tau=tau, iters=iters)
    assert out.dtype == np.float32
    np.testing.assert_allclose(
        out, ref_centered_clip(X, f, tau, iters), rtol=1e-5, atol=10 * _tol(case)
    )


def test_centered_clip_with_infinite_radius_is_the_mean() -> None:
    X = np.random.default_rng(1).standard_normal((7, 30)).astype(np.float32)
    out = RULES["centered-clip"](X, 1, tau=1e30, iters=1)
    np.testing.assert_allclose(out, X.astype(np.float64).mean(axis=0), rtol=1e-6, atol=1e-7)


def test_centered_clip_bounds_an_outlier_pull() -> None:
    rng = np.random.default_rng(2)
    X = (1e-2 * rng.standard_normal((9, 50))).astype(np.float32)
    X[0] = 1e6
    out = RULES["centered-clip"](X, 1, tau=0.5, iters=3, center=np.zeros(50))
    # Each iteration moves the center by at most tau/n per outlier, plus the honest pull.
    assert np.linalg.norm(out) < 3 * (0.5 / 9) + 0.1
    with pytest.raises(AggregationError, match="center"):
        RULES["centered-clip"](X, 1, center=np.zeros(49))
    with pytest.raises(AggregationError, match="tau"):
        RULES["centered-clip"](X, 1, tau=0.0)
    with pytest.raises(AggregationError, match="iters"):
        RULES["centered-clip"](X, 1, iters=0)


def test_robust_rules_ignore_a_huge_outlier_that_moves_the_mean() -> None:
    rng = np.random.default_rng(3)
    X = rng.standard_normal((7, 20)).astype(np.float32)
    honest_median = np.median(X[1:].astype(np.float64), axis=0)
    X[0] = 1e6
    assert np.abs(RULES["mean"](X, 1)).min() > 1e5
    for rule in ("median", "trimmed-mean", "krum", "multi-krum", "centered-clip"):
        out = RULES[rule](X, 1)
        assert np.abs(out - honest_median).max() < 5, rule


# --- GPU ---------------------------------------------------------------------------------------------


@pytest.mark.gpu
@pytest.mark.parametrize("rule", sorted(RULES))
def test_cupy_rules_match_numpy(rule: str) -> None:
    cupy = pytest.importorskip("cupy")
    rng = np.random.default_rng(6)
    X = (rng.standard_normal(5000) + 1e-4 * rng.standard_normal((9, 5000))).astype(np.float32)
    X[4, 10] = np.nan
    out = RULES[rule](cupy.asarray(X), 2)
    assert isinstance(out, cupy.ndarray)
    np.testing.assert_allclose(out.get(), RULES[rule](X, 2), rtol=1e-6, atol=1e-6)


def test_ss_clip_keeps_close_rows_whole_and_clips_a_far_one_to_the_honest_scale():
    X = np.array([[0, 0], [1, 0], [0, 1], [1, 1], [3, 3]], dtype=np.float32)
    # distances 1, 1, 1.41, 4.24: tau = the 3rd smallest (m - f = 4 - 1); the liar, within
    # SS_CLIP_REJECT radii, is clipped to tau: it moves the result by at most tau / n
    out = RULES["ss-clip"](X, 1)
    np.testing.assert_allclose(out, [0.6, 0.6], rtol=1e-6)
    X[4] = [100, 100]  # farther than SS_CLIP_REJECT radii: no weight at all
    np.testing.assert_allclose(RULES["ss-clip"](X, 1), [0.4, 0.4], rtol=1e-6)
    honest = RULES["ss-clip"](X[:4], 0)  # f = 0: nothing clipped, the plain mean
    np.testing.assert_allclose(honest, X[:4].mean(axis=0), rtol=1e-6)
