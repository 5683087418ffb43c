"""`pairwise_sq_dists` against a float64 loop over pairs, on the inputs that break naive code."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from swarmnode.kernels import distance
from swarmnode.kernels.distance import finite_rows, gram_to_sq_dists, pairwise_sq_dists
from swarmnode.kernels.errors import ShapeError

FUZZ = settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def reference(X: np.ndarray) -> np.ndarray:
    """The slow truth: a float64 loop over pairs, +inf wherever a non-finite row is involved."""
    X = np.asarray(X, dtype=np.float64)
    n = X.shape[0]
    ok = np.isfinite(X).all(axis=1)
    D = np.full((n, n), np.inf)
    for i in range(n):
        for j in range(n):
            if ok[i] and ok[j]:
                D[i, j] = np.sum((X[i] - X[j]) ** 2)
    return D


def near_identical(n: int, d: int, seed: int, rel: float = 1e-4) -> np.ndarray:
    """Peers' models: a shared base plus noise at `rel` of its scale."""
    rng = np.random.default_rng(seed)
    base = rng.standard_normal(d)
    return (base + rel * rng.standard_normal((n, d))).astype(np.float32)


def naive_gram(X: np.ndarray) -> np.ndarray:
    """What we must never do: ||a||^2 + ||b||^2 - 2ab on the raw float32 rows."""
    G = (X @ X.T).astype(np.float64)
    diag = np.diagonal(G)
    return np.maximum(diag[:, None] + diag[None, :] - 2 * G, 0)


def assert_close(
    D: np.ndarray, R: np.ndarray, rtol: float, atol_of_max: float | None = None
) -> None:
    """Entry by entry to `rtol`, with an absolute slack of `atol_of_max` x the largest distance
    (default rtol x 1e-3)."""
    assert D.shape == R.shape and D.dtype == np.float64
    assert np.array_equal(np.isinf(D), np.isinf(R))
    fin = np.isfinite(R)
    slack = rtol * 1e-3 if atol_of_max is None else atol_of_max
    np.testing.assert_allclose(D[fin], R[fin], rtol=rtol, atol=slack * max(R[fin].max(), 0))


# kernels/distance.py's contract for float32 rows: an absolute error ~eps32 x (G_ii + G_jj), with
# G_ii = ||x_i - r||^2 <= the largest distance (r is one of the rows). Two iid rows that happen
# to lie close together (hypothesis finds them at small d) are held to that bound, not to a
# relative one: their distance can be 1e-5 of the others'.
EPS32_BOUND = 16 * float(np.finfo(np.float32).eps)


@FUZZ
@given(n=st.integers(1, 9), d=st.integers(1, 300), seed=st.integers(0, 2**32 - 1))
def test_iid_rows_match_the_reference(n: int, d: int, seed: int) -> None:
    X = np.random.default_rng(seed).standard_normal((n, d)).astype(np.float32)
    assert_close(pairwise_sq_dists(X), reference(X), rtol=1e-5, atol_of_max=EPS32_BOUND)


@FUZZ
@given(n=st.integers(2, 9), d=st.integers(50, 2000), seed=st.integers(0, 2**32 - 1))
def test_near_identical_rows_match_the_reference_entry_by_entry(n: int, d: int, seed: int) -> None:
    X = near_identical(n, d, seed)
    D, R = pairwise_sq_dists(X), reference(X)
    off = ~np.eye(n, dtype=bool)
    # Every off-diagonal entry to 1e-4 of itself (they are all ~1e-8 of ||x||^2).
    np.testing.assert_allclose(D[off], R[off], rtol=1e-4)
    assert np.all(np.diagonal(D) == 0)


@FUZZ
@given(
    n=st.integers(3, 9),
    d=st.integers(20, 500),
    n_bad=st.integers(1, 2),
    scale=st.sampled_from([1e2, 1e4, 1e6]),
    seed=st.integers(0, 2**32 - 1),
)
def test_adversarial_outliers_leave_the_honest_distances_exact(
    n: int, d: int, n_bad: int, scale: float, seed: int
) -> None:
    rng = np.random.default_rng(seed)
    X = near_identical(n, d, seed)
    bad = rng.choice(n, size=min(n_bad, n - 2), replace=False)  # row 0 may be one of them
    X[bad] = (scale * rng.standard_normal((bad.size, d))).astype(np.float32)
    D, R = pairwise_sq_dists(X), reference(X)
    honest = np.setdiff1d(np.arange(n), bad)
    block = np.ix_(honest, honest)
    off = ~np.eye(honest.size, dtype=bool)
    np.testing.assert_allclose(D[block][off], R[block][off], rtol=1e-4)
    np.testing.assert_allclose(D[bad], R[bad], rtol=1e-4, atol=1e-6 * R[bad].max())


def test_a_row_built_to_look_central_does_not_blur_the_others(monkeypatch) -> None:
    # The reference is the medoid of a coordinate subsample. A byzantine row equal to an honest
    # one on those coordinates but far away elsewhere gets picked; centering on it would bring
    # the cancellation back. The check after the pass must notice and recenter.
    n, d = 9, 50_000
    X = near_identical(n, d, seed=3)
    sub = distance._subsample_columns(d)
    X[0] = np.median(X[1:], axis=0)  # central on every coordinate...
    elsewhere = np.setdiff1d(np.arange(d), sub)
    X[0, elsewhere] += 10.0  # ...but far away off the subsample
    calls = []
    real = distance._dists_around
    monkeypatch.setattr(
        distance, "_dists_around", lambda X, ref, xp: calls.append(ref) or real(X, ref, xp)
    )
    D, R = pairwise_sq_dists(X), reference(X)
    assert calls[0] == 0 and len(calls) == 2 and calls[1] != 0  # fooled once, then recentered
    off = ~np.eye(n - 1, dtype=bool)
    np.testing.assert_allclose(D[1:, 1:][off], R[1:, 1:][off], rtol=1e-4)
    np.testing.assert_allclose(D[0], R[0], rtol=1e-4)


def test_naive_gram_trick_fails_where_centering_does_not() -> None:
    X = near_identical(10, 20_000, seed=7)
    R = reference(X)
    off = ~np.eye(10, dtype=bool)
    naive_err = np.max(np.abs(naive_gram(X) - R)[off] / R[off])
    ours_err = np.max(np.abs(pairwise_sq_dists(X) - R)[off] / R[off])
    assert naive_err > 0.5  # noise: the naive distances carry no information
    assert ours_err < 1e-5


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
@pytest.mark.parametrize("row", [0, 3])
def test_non_finite_rows_get_inf_and_poison_nothing_else(bad: float, row: int) -> None:
    X = near_identical(6, 400, seed=1)
    clean = reference(np.delete(X, row, axis=0))
    X[row, 17] = bad
    D = pairwise_sq_dists(X)
    assert np.all(np.isinf(D[row])) and np.all(np.isinf(D[:, row]))
    assert np.all(D[row] > 0)  # +inf, never -inf or NaN
    np.testing.assert_allclose(np.delete(np.delete(D, row, 0), row, 1), clean, rtol=1e-4)


def test_all_rows_non_finite_gives_all_inf() -> None:
    X = np.full((3, 5), np.nan, dtype=np.float32)
    assert np.all(np.isposinf(pairwise_sq_dists(X)))


def test_huge_finite_rows_fall_back_to_float64_instead_of_overflowing() -> None:
    X = near_identical(5, 300, seed=2)
    X[2] = 1e30  # its float32 square overflows; the distance itself is finite
    D, R = pairwise_sq_dists(X), reference(X)
    assert np.all(np.isfinite(D))
    assert_close(D, R, rtol=1e-6)


def test_identical_rows_are_at_distance_exactly_zero() -> None:
    X = np.tile(near_identical(1, 1000, seed=4), (4, 1))
    assert np.all(pairwise_sq_dists(X) == 0)


def test_edge_shapes() -> None:
    assert pairwise_sq_dists(np.zeros((0, 5), dtype=np.float32)).shape == (0, 0)
    assert pairwise_sq_dists(np.ones((1, 5), dtype=np.float32)).tolist() == [[0.0]]
    assert pairwise_sq_dists(np.zeros((3, 0), dtype=np.float32)).tolist() == [[0.0] * 3] * 3


def test_float64_input_and_non_contiguous_views_work() -> None:
    X = near_identical(5, 600, seed=5)
    R = reference(X)
    assert_close(pairwise_sq_dists(X.astype(np.float64)), R, rtol=1e-9)
    wide = np.zeros((5, 1200), dtype=np.float32)
    wide[:, ::2] = X
    assert_close(pairwise_sq_dists(wide[:, ::2]), R, rtol=1e-5)


def test_long_rows_span_several_chunks() -> None:
    X = near_identical(4, 300_001, seed=6)  # > one 4 MB chunk for n=4
    assert_close(pairwise_sq_dists(X), reference(X), rtol=1e-5)


@pytest.mark.parametrize(
    "bad",
    [np.zeros(5, np.float32), np.zeros((2, 2, 2), np.float32), np.zeros((2, 3), np.int32)],
)
def test_bad_inputs_raise_shape_error(bad: np.ndarray) -> None:
    with pytest.raises(ShapeError):
        pairwise_sq_dists(bad)


def test_non_arrays_raise_shape_error() -> None:
    with pytest.raises(ShapeError):
        pairwise_sq_dists([[1.0, 2.0], [3.0, 4.0]])


def test_gram_to_sq_dists_reference() -> None:
    G = np.array([[4.0, 2.0, 0.0], [2.0, 2.0, 0.0], [0.0, 0.0, np.nan]])
    D = gram_to_sq_dists(G, finite=np.array([True, True, True]))
    assert D[0, 1] == D[1, 0] == 2.0 and D[0, 0] == 0.0
    assert np.all(np.isposinf(D[2])) and np.all(np.isposinf(D[:, 2]))


def test_finite_rows_mask() -> None:
    X = np.ones((4, 10), dtype=np.float32)
    X[1, 3], X[2, 9] = np.nan, -np.inf
    X[3] = 3e38  # a finite row whose float32 sum would overflow
    assert finite_rows(X).tolist() == [True, False, False, True]


# --- GPU: the RawKernel path against numpy -------------------------------------------------------


@pytest.mark.gpu
@pytest.mark.parametrize("seed", range(4))
def test_cupy_matches_numpy(seed: int) -> None:
    cupy = pytest.importorskip("cupy")
    X = near_identical(7, 100_003, seed=seed)
    X[seed % 7, 11] = np.nan
    D_gpu = pairwise_sq_dists(cupy.asarray(X))
    assert isinstance(D_gpu, np.ndarray)
    assert_close(D_gpu, reference(X), rtol=1e-4)


@pytest.mark.gpu
def test_cupy_kernel_checks_its_inputs() -> None:
    cupy = pytest.importorskip("cupy")
    with pytest.raises(ShapeError):
        gram_to_sq_dists(cupy.zeros((3, 3), dtype=cupy.float32), finite=cupy.ones(3, bool))
    with pytest.raises(ShapeError):
        gram_to_sq_dists(cupy.zeros((3, 4)), finite=cupy.ones(3, bool))
    with pytest.raises(ShapeError):
        gram_to_sq_dists(cupy.zeros((3, 3)), finite=cupy.ones(4, bool))
    G = cupy.asarray([[4.0, 2.0], [2.0, 2.0]])
    D = gram_to_sq_dists(G, finite=cupy.asarray([True, True]))
    assert D.get().tolist() == [[0.0, 2.0], [2.0, 0.0]]
