"""The sampled top-k selection returns exactly a top-k set, whatever the sample says."""

from __future__ import annotations

import numpy as np
import pytest
from swarmnode.kernels import compress
from swarmnode.kernels.topk_select import MIN_N, STRIDE, _full, top_k_indices

pytestmark = pytest.mark.timeout(60)


def _is_top_k(a: np.ndarray, idx: np.ndarray, k: int) -> bool:
    kept = np.zeros(a.size, dtype=bool)
    kept[idx] = True
    return idx.size == k == np.unique(idx).size and a[~kept].max() <= a[kept].min()


@pytest.mark.parametrize(("n", "ratio"), [(MIN_N, 0.01), (300_001, 0.01), (1 << 20, 0.2)])
def test_the_same_set_as_a_full_selection(n: int, ratio: float) -> None:
    a = np.abs(np.random.default_rng(n).standard_normal(n).astype(np.float32))
    k = compress.topk_count(n, ratio)
    assert set(top_k_indices(a, k).tolist()) == set(_full(a, k).tolist())


def test_large_values_the_sample_never_sees_are_still_kept() -> None:
    """Every sampled position is small and every large value sits between them: the sample's
    threshold is far too low or too high, and the result is still exact."""
    n, k = 400_000, 4000
    a = np.full(n, 1.0, dtype=np.float32)
    off = np.arange(n) % STRIDE != 0
    a[np.flatnonzero(off)[:k]] = 5.0 + np.arange(k, dtype=np.float32)
    idx = top_k_indices(a, k)
    assert _is_top_k(a, idx, k) and (a[idx] >= 5.0).all()


def test_a_tied_boundary_is_left_to_the_full_selection() -> None:
    n, k = 200_000, 2000
    a = np.zeros(n, dtype=np.float32)
    a[::50] = 1.0  # 4000 equal values for 2000 places
    idx = top_k_indices(a, k)
    np.testing.assert_array_equal(np.sort(idx), np.sort(_full(a, k)))


def test_nan_falls_back_to_the_full_selection() -> None:
    a = np.abs(np.random.default_rng(1).standard_normal(200_000).astype(np.float32))
    a[::STRIDE][5] = np.nan
    idx = top_k_indices(a, 2000)
    np.testing.assert_array_equal(np.sort(idx), np.sort(_full(a, 2000)))


def test_topk_encode_keeps_the_largest_of_a_large_vector() -> None:
    x = np.random.default_rng(2).standard_normal(1 << 20).astype(np.float32)
    p = compress.topk_encode(x, 0.01)
    assert _is_top_k(np.abs(x), compress.topk_indices(p), p.k)
