"""Chunked distances and clipping (gossip/robust/chunked.py, aggregate.clip_toward): the float64
whole-array results, across chunk boundaries, without copying a model that needs no clip."""

from __future__ import annotations

import numpy as np
import pytest
from swarmnode.gossip.robust import chunked
from swarmnode.gossip.robust.aggregate import SS_CLIP_REJECT, clip_toward

N = 3 * chunked.CHUNK + 1234  # several chunks and a ragged last one


def _pair(scale: float = 1e-3) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    own = rng.standard_normal(N, dtype=np.float32)
    return own, own + np.float32(scale) * rng.standard_normal(N, dtype=np.float32)


def test_distance_and_norm_match_the_float64_whole_array_ones() -> None:
    own, other = _pair()
    want = float(np.linalg.norm(other.astype(np.float64) - own))
    assert chunked.distance(own, other) == pytest.approx(want, rel=1e-12)
    assert chunked.norm(own) == pytest.approx(float(np.linalg.norm(own.astype(np.float64))))
    assert chunked.distance(own, own) == 0.0
    bad = other.copy()
    bad[-1] = np.nan
    assert not np.isfinite(chunked.distance(own, bad))


def test_clip_toward_returns_the_push_itself_within_tau_and_clips_beyond() -> None:
    own, other = _pair()
    dist = chunked.distance(own, other)
    assert clip_toward(own, other, 2 * dist) is other  # no copy: own + (other - own) is other
    clipped = clip_toward(own, other, dist / 2)
    assert clipped is not None and clipped.dtype == np.float32
    want = (own + (other.astype(np.float64) - own) * 0.5).astype(np.float32)
    np.testing.assert_array_equal(clipped, want)
    assert chunked.distance(own, clipped) == pytest.approx(dist / 2, rel=1e-5)
    assert clip_toward(own, other, dist / (SS_CLIP_REJECT * 1.01)) is None  # too far: refused
    bad = other.copy()
    bad[7] = np.inf
    assert clip_toward(own, bad, 1e30) is None  # never mixed, whatever the radius


def _strided(x: np.ndarray) -> np.ndarray:
    """The same values in a non-contiguous view: the chunked numpy loop's input."""
    return np.repeat(x, 2)[::2]


@pytest.mark.parametrize("edge", ["none", "nan", "inf", "huge"])
def test_the_one_pass_kernel_and_the_chunked_loop_agree(edge: str) -> None:
    """Contiguous float32 takes NumKong's one pass, anything else the chunked float64 loop:
    the same distance and norm, NaN and Inf alike, and no float32 overflow of a difference
    of two finite extremes (its square is computed in float64)."""
    own, other = _pair()
    if edge == "nan":
        other[N // 2] = np.nan
    elif edge == "inf":
        other[3] = -np.inf
    elif edge == "huge":
        own[5], other[5] = np.float32(-3e38), np.float32(3e38)
    one = chunked.distance(own, other)
    loop = chunked.distance(_strided(own), _strided(other))
    if edge in ("nan", "inf"):
        assert not np.isfinite(one) and not np.isfinite(loop)
    else:
        assert np.isfinite(one) and one == pytest.approx(loop, rel=1e-12)
    assert chunked.norm(other) == pytest.approx(
        chunked.norm(_strided(other)), rel=1e-12, nan_ok=True
    )
