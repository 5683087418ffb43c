"""gossip/robust/heading.py: a pull back along my outer momentum is cut; an honest pull is not."""

from __future__ import annotations

import numpy as np
import pytest
from swarmnode.gossip.robust import aggregate, chunked, heading
from swarmnode.gossip.robust.push_guard import PushGuard

pytestmark = pytest.mark.timeout(30)

D = 2000


def history(seed: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(own, m, sideways): a model, its outer momentum m (pointing back, as `OuterStep` keeps
    it) and a unit direction orthogonal to m (the spread between non-iid peers)."""
    rng = np.random.default_rng(seed)
    own = rng.standard_normal(D).astype(np.float32)
    m = (0.05 * rng.standard_normal(D)).astype(np.float32)
    side = rng.standard_normal(D)
    side -= (side @ m) / (m @ m) * m
    return own, m, (side / np.linalg.norm(side)).astype(np.float32)


def back_of(own: np.ndarray, other: np.ndarray, m: np.ndarray) -> float:
    """The component of other - own along m, in units of |m|."""
    b, norm = heading.backward_part(own, other, m)
    return b / norm


def test_ipm_push_against_the_heading_is_cut_to_the_limit() -> None:
    own, m, side = history()
    ipm = own + 10 * m + 0.5 * np.linalg.norm(m) * side  # eps = 10 periods back, a bit sideways
    out = heading.cap_backward(own, ipm, m, 0.5)
    assert back_of(own, ipm, m) == pytest.approx(10, rel=1e-4)
    assert back_of(own, out, m) == pytest.approx(0.5, rel=1e-3)
    # the sideways part is left to the distance clip: unchanged
    assert float((out - own) @ side) == pytest.approx(float((ipm - own) @ side), rel=1e-3)


@pytest.mark.parametrize("back", [0.0, 0.3, -2.0])
def test_honest_pull_is_left_alone(back: float) -> None:
    """Sideways (the non-iid spread), a little back, or ahead (a peer further along)."""
    own, m, side = history(1)
    honest = own + back * m + 3 * np.linalg.norm(m) * side
    assert heading.cap_backward(own, honest, m, 0.5) is honest


def test_no_heading_or_a_zero_or_non_finite_one_cuts_nothing() -> None:
    own, m, _ = history(2)
    ipm = own + 10 * m
    assert heading.cap_backward(own, ipm, None, 0.5) is ipm
    assert heading.cap_backward(own, ipm, np.zeros_like(m), 0.5) is ipm
    bad = m.copy()
    bad[3] = np.nan
    assert heading.cap_backward(own, ipm, bad, 0.5) is ipm


def test_cut_is_chunked_and_equals_the_whole_array_formula(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(chunked, "CHUNK", 128)  # many chunks, and a short last one
    own, m, side = history(3)
    ipm = own + 4 * m + side
    out = heading.cap_backward(own, ipm, m, 0.5)
    u = m.astype(np.float64) / np.linalg.norm(m)
    b = (ipm - own).astype(np.float64) @ u
    want = ipm - (b - 0.5 * np.linalg.norm(m)) * u
    np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-6)
    assert out.dtype == np.float32 and out.shape == ipm.shape


def test_backward_part_rejects_mismatched_shapes() -> None:
    with pytest.raises(ValueError, match="heading between"):
        heading.backward_part(np.zeros(3, np.float32), np.zeros(3, np.float32), np.zeros(4))


def rows_with_a_liar(seed: int = 4) -> tuple[list[np.ndarray], np.ndarray, np.ndarray]:
    own, m, _ = history(seed)
    rng = np.random.default_rng(seed + 10)
    spread = 2 * np.linalg.norm(m) / np.sqrt(D)
    honest = [own + (spread * rng.standard_normal(D)).astype(np.float32) for _ in range(3)]
    return [own, *honest, own + 6 * m], own, m


def test_own_round_cuts_the_liars_pull_and_keeps_tau() -> None:
    rows, own, m = rows_with_a_liar()
    tau_before = aggregate.clip_radius(np.stack(rows), 1)
    tau, agg = heading.ss_clip_round(rows, 1, m, 0.5)
    _, plain = heading.ss_clip_round(rows, 1, None, 0.5)
    assert tau == tau_before  # the radius my pushes are judged by is the rows' as they came
    np.testing.assert_array_equal(plain, aggregate.self_centered_clip(np.stack(rows), 1))
    # the liar alone pulls back; cut, its share (1/5 of at most 0.5 |m|) is all that is left
    assert back_of(own, plain, m) > 0.3
    assert 0 < back_of(own, agg, m) <= 0.5 / 5 + 0.05


def test_own_round_without_a_liar_is_unchanged() -> None:
    rows, _, m = rows_with_a_liar()
    rows = rows[:4]
    np.testing.assert_array_equal(
        heading.ss_clip_round(rows, 1, m, 0.5)[1], heading.ss_clip_round(rows, 1, None, 0.5)[1]
    )


def test_push_is_cut_then_bounded_and_a_far_one_is_judged_as_it_came() -> None:
    own, m, _ = history(5)
    guard = PushGuard()
    tau = float(np.linalg.norm(3 * m))
    ipm = own + 3 * m  # at tau: mixed whole before, cut to 0.5 |m| back now
    out = heading.bound_push(guard, own, ipm, tau, m, 0.5, "liar")
    assert out is not None and back_of(own, out, m) == pytest.approx(0.5, rel=1e-3)
    assert back_of(own, heading.bound_push(guard, own, ipm, tau, None, 0.5, "x"), m) > 2.9
    far = own + 20 * m  # 6.7 tau: refused whatever a cut would make of it
    assert heading.bound_push(guard, own, far, tau, m, 0.5, "liar") is None
    assert guard.refused == 1
