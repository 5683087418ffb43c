"""The push bound (gossip/robust/push_guard.py): its radius adapts to the own rounds' distances, a far
push is refused (and logged once per sender per minute), a near one is clipped to tau."""

from __future__ import annotations

import logging

import numpy as np
import pytest
from swarmnode.gossip.robust.push_guard import PushGuard

D = 100


def _at(own: np.ndarray, dist: float, direction: int = 0) -> np.ndarray:
    """A model `dist` away from `own` along one coordinate."""
    out = own.astype(np.float64).copy()
    out[direction] += dist
    return out.astype(np.float32)


def test_radius_is_factor_times_the_median_of_the_last_window_distances() -> None:
    own = np.ones(D, np.float32)
    guard = PushGuard(window=4, factor=2.0)
    assert guard.radius() is None
    guard.observe(own, [_at(own, 1.0), _at(own, 3.0), _at(own, 100.0)])  # one liar's answer
    assert guard.radius() == pytest.approx(2.0 * 3.0)  # the median ignores the far one
    guard.observe(own, [_at(own, 0.5)] * 4)  # the window forgets the older distances
    assert guard.radius() == pytest.approx(1.0)


def test_a_group_identical_to_me_gives_no_radius_and_the_first_is_my_norm() -> None:
    own = np.full(D, 0.5, np.float32)
    guard = PushGuard(factor=2.0)
    guard.observe(own, [own.copy()])
    assert guard.radius() is None
    assert guard.first_radius(own) == pytest.approx(2.0 * 0.5 * np.sqrt(D))
    assert guard.first_radius(np.zeros(D, np.float32)) is None


def test_a_near_push_is_clipped_to_tau_and_a_far_one_refused() -> None:
    own = np.zeros(D, np.float32)
    guard = PushGuard(reject=4.0)
    inside = guard.bound(own, _at(own, 0.5), 1.0, "a")
    np.testing.assert_allclose(inside, _at(own, 0.5))  # within tau: as it came
    clipped = guard.bound(own, _at(own, 3.0), 1.0, "a")
    assert np.linalg.norm(clipped - own) == pytest.approx(1.0)  # moved by tau, not 3
    assert guard.bound(own, _at(own, 4.5), 1.0, "a") is None
    assert guard.bound(own, _at(own, 1.0), None, "a") is None  # no radius: not mixed
    assert guard.refused == 1


def test_the_poisoned_push_of_issue_10_is_refused() -> None:
    # pull x, set every hidden bias to -1e4 (t), push 2 t - x: the mean of x and it is t
    rng = np.random.default_rng(0)
    x = rng.standard_normal(D).astype(np.float32) * 0.1
    t = x.copy()
    t[-10:] = -1e4
    guard = PushGuard()
    guard.observe(x, [x + rng.standard_normal(D).astype(np.float32) * 0.01])
    assert guard.bound(x, 2 * t - x, guard.radius(), "liar") is None
    assert guard.bound(x, 2 * t - x, guard.first_radius(x), "liar") is None


def test_refusals_are_info_while_news_and_a_warning_only_when_they_go_on(caplog) -> None:
    """A joiner far ahead is refused for a few seconds (INFO, once a period); a sender refused
    over WARN_SPAN_S and more is a WARNING at once, then one line a period; a sender quiet for
    SPAN_RESET_S starts over."""
    now = [0.0]
    guard = PushGuard(log_every_s=60.0, clock=lambda: now[0])
    own, far = np.zeros(D, np.float32), np.full(D, 100.0, np.float32)
    with caplog.at_level(logging.INFO, logger="swarmnode.gossip.robust.push_guard"):
        for t in range(10):  # the join: ten refusals in ten seconds
            now[0] = float(t)
            guard.bound(own, far, 1.0, "joiner")
            guard.bound(own, far, 1.0, "liar")
        for t in range(10, 100, 5):  # the liar goes on
            now[0] = float(t)
            guard.bound(own, far, 1.0, "liar")
        now[0] = 400.0  # long quiet, then refused again: news again
        guard.bound(own, far, 1.0, "liar")
    lines = [(r.levelno, r.getMessage()) for r in caplog.records]
    joiner = [level for level, line in lines if "joiner" in line]
    liar = [level for level, line in lines if "liar" in line]
    assert joiner == [logging.INFO]
    # t=0 INFO; t=30 (3+ refusals over 30 s) WARNING at once; t=90 the next period; t=400 anew
    assert liar == [logging.INFO, logging.WARNING, logging.WARNING, logging.INFO]
    assert guard.refused == 10 + 10 + 18 + 1


def test_bad_settings_name_their_field() -> None:
    with pytest.raises(ValueError, match="`window`"):
        PushGuard(window=0)


def test_a_young_swarm_follows_its_distances_before_the_anchor_applies() -> None:
    """The founder's first distances to a joiner that loaded its model are tiny; the joiner's
    next pushes are ~300x farther. Before ANCHOR_MIN distances the radius follows them."""
    own = np.ones(D, np.float32)
    guard = PushGuard(factor=4.0)
    guard.observe(own, [_at(own, 0.004)])
    for _ in range(3):
        guard.observe(own, [_at(own, 1.3)])
    assert guard.radius() == pytest.approx(4.0 * 1.3, rel=1e-3)


def test_the_radius_is_anchored_and_grows_at_most_a_fifth_a_round() -> None:
    # issue 22: a drag pulled the honest models apart and so widened its own allowance
    own = np.ones(D, np.float32)
    guard = PushGuard(factor=4.0)
    for _ in range(40):  # a long calm: distances of 1
        guard.observe(own, [_at(own, 1.0)] * 3)
    assert guard.radius() == pytest.approx(4.0)
    radii = []
    for _ in range(10):  # then distances ten times larger, round after round
        guard.observe(own, [_at(own, 10.0)] * 3)
        radii.append(guard.radius())
    assert all(b <= a * 1.2 + 1e-9 for a, b in zip([4.0, *radii], radii, strict=False))
    assert radii[-1] <= 4.0 * 2.0  # and never past 2 x the long window's median (still 1)
    guard.observe(own, [_at(own, 0.1)] * 16)  # it shrinks at once
    assert guard.radius() == pytest.approx(0.4)
    plain = PushGuard(factor=4.0, anchored=False)  # --push-budget off: the short median alone
    plain.observe(own, [_at(own, 1.0)] * 3)
    plain.observe(own, [_at(own, 10.0)] * 16)
    assert plain.radius() == pytest.approx(40.0)


def test_a_push_is_clipped_to_what_its_senders_travel_leaves() -> None:
    own = np.zeros(D, np.float32)
    guard = PushGuard(factor=1.0)
    out = guard.bound(own, _at(own, 3.0), tau=4.0, sender="s", clip=0.5)
    assert np.linalg.norm(out - own) == pytest.approx(0.5, rel=1e-5)
    assert guard.bound(own, _at(own, 3.0), tau=4.0, sender="s", clip=0.0) is None
    assert guard.refused == 0  # not a refusal: nothing left to move by
    assert guard.bound(own, _at(own, 30.0), tau=4.0, sender="s", clip=0.5) is None
    assert guard.refused == 1  # the drop bound is still 4 tau, not 4 x the clip
