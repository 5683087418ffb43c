"""The failure detector's timing math: pure functions checked against tables."""

from __future__ import annotations

import pytest
from swarmnode.gossip.membership.failure import (
    ALIVE,
    DEAD,
    SUSPECT,
    dead_since,
    detection_deadline,
    liveness,
    size_allowance,
    spread_rounds,
    thresholds,
    timing_problems,
    tombstone_expired,
)


@pytest.mark.parametrize(
    ("last_advance", "now", "expected"),
    [
        (10.0, 10.0, ALIVE),  # just heard
        (10.0, 11.49, ALIVE),
        (10.0, 11.5, SUSPECT),  # exactly suspect_after of silence
        (10.0, 12.49, SUSPECT),
        (10.0, 12.5, DEAD),  # exactly dead_after of silence
        (10.0, 1000.0, DEAD),
        (10.0, 9.0, ALIVE),  # advanced "in the future" (credited stall): never early death
    ],
)
def test_liveness_table(last_advance: float, now: float, expected: str) -> None:
    assert liveness(last_advance, now, suspect_after=1.5, dead_after=2.5) == expected


def test_dead_since_is_when_the_silence_ran_out() -> None:
    assert dead_since(100.0, 2.5) == 102.5


@pytest.mark.parametrize(
    ("since", "now", "ttl", "expired"),
    [(0.0, 59.9, 60.0, False), (0.0, 60.0, 60.0, True), (5.0, 64.9, 60.0, False)],
)
def test_tombstone_expiry_table(since: float, now: float, ttl: float, expired: bool) -> None:
    assert tombstone_expired(since, now, ttl) is expired


@pytest.mark.parametrize(
    ("n", "fanout", "rounds"),
    # ceil(ln n / ln(1 + 2 fanout)) + 1
    [
        (1, 3, 0),
        (2, 3, 2),
        (6, 3, 2),
        (8, 3, 3),
        (48, 3, 3),
        (50, 3, 4),
        (1024, 3, 5),
        (1024, 1, 8),
    ],
)
def test_spread_rounds_table(n: int, fanout: int, rounds: int) -> None:
    assert spread_rounds(n, fanout) == rounds


def test_spread_rounds_rejects_zero_fanout() -> None:
    with pytest.raises(ValueError, match="fanout"):
        spread_rounds(10, 0)


@pytest.mark.parametrize(
    ("n", "allowance"),
    [(1, 0.0), (4, 0.0), (5, 0.5), (16, 1.0), (64, 1.5), (256, 1.5), (1024, 2.0)],
)
def test_size_allowance_grows_with_log_n(n: int, allowance: float) -> None:
    assert size_allowance(n, fanout=3, gossip_interval=0.5) == pytest.approx(allowance)


def test_thresholds_shift_both_limits_by_the_allowance() -> None:
    assert thresholds(1.5, 2.5, 0.5, 4, 3) == (1.5, 2.5)
    assert thresholds(1.5, 2.5, 0.5, 1024, 3) == pytest.approx((3.5, 4.5))


@pytest.mark.parametrize(
    ("n", "deadline"),
    [
        (4, 2.5),  # every peer hears the member directly: dead_after itself
        (16, 2.5 + 1.0 + 3 * 0.5),
        (1024, 2.5 + 2.0 + 5 * 0.5),
    ],
)
def test_detection_deadline_table(n: int, deadline: float) -> None:
    assert detection_deadline(2.5, 0.5, n, 3) == pytest.approx(deadline)


def test_default_timing_meets_the_small_swarm_target() -> None:
    # A SIGKILLed peer of a 4-peer swarm must be dead everywhere within 3 s.
    assert detection_deadline(2.5, 0.5, 4, 3) <= 3.0


def test_timing_problems_accepts_the_defaults() -> None:
    assert timing_problems(0.5, 1.5, 2.5, 60.0) == []


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        ((0.0, 1.5, 2.5, 60.0), "`gossip_interval` must be a positive"),
        ((0.5, float("nan"), 2.5, 60.0), "`suspect_after` must be a positive"),
        ((0.5, "1", 2.5, 60.0), "`suspect_after` must be a positive"),
        ((0.5, 0.6, 2.5, 60.0), "at least twice `gossip_interval`"),
        ((0.5, 1.5, 1.5, 60.0), "`dead_after` 1.5 s must exceed"),
        ((0.5, 1.5, 2.5, 5.0), "`tombstone_ttl` 5 s must be at least 4x"),
    ],
)
def test_timing_problems_name_the_bad_setting(args: tuple, fragment: str) -> None:
    problems = timing_problems(*args)
    assert any(fragment in p for p in problems), problems
