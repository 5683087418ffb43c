"""Suspicion that follows each member's own heartbeats (gossip/membership/failure.py): a member
whose beats come late but steadily is not declared dead, a healthy one keeps the configured
thresholds, and every crash is still detected within the cap. A fake clock drives one table."""

from __future__ import annotations

import random

import pytest
from swarmnode.gossip.membership.entries import Gossiped
from swarmnode.gossip.membership.failure import (
    ALIVE,
    DEAD,
    SUSPECT,
    dead_cap,
    gap_update,
    healthy_gap,
    stretched,
    worst_gap,
)
from swarmnode.gossip.membership.table import MemberTable, Timing

pytestmark = pytest.mark.timeout(30)

TIMING = Timing(
    suspect_after=1.5, dead_after=2.5, tombstone_ttl=60.0, gossip_interval=0.5, fanout=3
)


class Beats:
    """One table and one member "b" whose heartbeat advances when `beat` says, on a fake clock;
    `states` records b's state at every 10 ms of the run."""

    def __init__(self, timing: Timing = TIMING) -> None:
        self.t = MemberTable("me", "me.host:7070", 1, timing)
        self.now, self.hb = 100.0, 1
        self.t.merge([self._g()], self.now)
        self.states: list[str] = []

    def _g(self) -> Gossiped:
        return Gossiped("b", "b.host:7070", 1, self.hb, ALIVE, 0.0, {})

    def run(self, gaps: list[float]) -> None:
        for gap in gaps:
            self.wait(gap)
            self.hb += 1
            self.t.merge([self._g()], self.now)

    def wait(self, seconds: float, step: float = 0.01) -> None:
        end = self.now + seconds
        while self.now < end - 1e-9:
            self.now = min(end, self.now + step)
            self.t.sweep(self.now)
            m = self.t.get("b", self.now)
            self.states.append(m.state if m else "gone")

    def state(self) -> str:
        return self.t.get("b", self.now).state


def test_a_member_heard_every_interval_keeps_the_configured_thresholds() -> None:
    rng = random.Random(1)
    b = Beats()
    # a loopback member: its beats every 0.5 s, some heard twice at once (relayed), some late
    b.run([rng.choice([0.0, 0.45, 0.5, 0.5, 0.55, 0.7]) for _ in range(200)])
    assert b.t.limits_of("b") == (1.5, 2.5)
    assert set(b.states) == {ALIVE}


@pytest.mark.parametrize("period", [1.0, 2.0, 2.2])
def test_a_member_whose_beats_come_late_but_steadily_is_never_doubted_to_death(
    period: float,
) -> None:
    b = Beats()
    rng = random.Random(2)
    # at that pace from its first beat (the fixed thresholds doubted it at every beat over
    # 1.5 s, and killed it at the first gap over 2.5 s; a first gap over that cannot be told
    # from a crash)
    b.run([period * rng.uniform(0.9, 1.1) for _ in range(100)])
    assert DEAD not in b.states and "gone" not in b.states
    assert b.state() == ALIVE
    # and once measured, one lost beat (twice its pace of silence) is not a death either
    b.wait(2 * period)
    assert b.state() != DEAD


def test_a_member_whose_link_slows_down_keeps_up_with_its_measure() -> None:
    b = Beats()
    b.run([0.5 + 0.05 * i for i in range(80)])  # 0.5 s to 4.5 s between beats, step by step
    assert DEAD not in b.states and b.state() == ALIVE
    assert b.t.limits_of("b")[1] > 4.5


def test_a_jittery_member_is_neither_doubted_nor_killed_between_its_bursts() -> None:
    b = Beats()
    rng = random.Random(3)
    b.run([rng.choice([0.1, 0.3, 1.4]) for _ in range(10)])  # its first beats: no doubt yet
    # then bursts and 2.4 s of silence (fixed thresholds: suspect at each), then 3.5 s (dead)
    b.run([rng.choice([0.1, 0.3, 2.4]) for _ in range(100)])
    measured = len(b.states)
    b.run([rng.choice([0.1, 0.3, 2.4, 3.5]) for _ in range(100)])
    assert DEAD not in b.states and SUSPECT not in b.states[measured:]
    assert b.t.limits_of("b")[1] > 3.5


@pytest.mark.parametrize("gaps", [[0.5] * 50, [2.0] * 50, [0.1, 0.3, 2.4] * 30])
def test_a_crashed_member_is_dead_within_the_cap_whatever_its_pace(gaps: list[float]) -> None:
    b = Beats()
    b.run(gaps)
    assert b.state() == ALIVE
    after = len(b.states)
    b.wait(dead_cap(2.5, 0.0) + 0.02)  # crashed: no beat any more
    silence = b.states[after:]  # one state per 10 ms
    took = silence.index(DEAD) * 0.01  # dead at the sweep after it ran out: 10 ms late at most
    assert 2.5 - 0.01 <= took <= dead_cap(2.5, 0.0)
    assert SUSPECT in silence[: silence.index(DEAD)]  # doubted before its death


def test_a_member_that_beats_irregularly_on_purpose_gains_at_most_the_cap() -> None:
    b = Beats(TIMING._replace(dead_after_max=6.0))
    for lax in (1.0, 2.0, 3.0, 4.0, 5.0, 5.9):  # as lax as it can make us and stay alive
        b.run([0.05, lax] * 10)
    assert b.t.limits_of("b") == (pytest.approx(5.0), 6.0)  # suspicion still 1 s before death
    b.wait(6.0 + 0.01)  # crashed: dead once the cap's silence has passed
    assert b.state() == DEAD


def test_a_slow_member_declared_dead_keeps_its_measure_in_its_next_life() -> None:
    b = Beats()
    b.run([1.0, 2.4] * 10)  # measured: late beats, stretched thresholds
    stretched_limits = b.t.limits_of("b")
    assert stretched_limits[1] > 2.5
    b.wait(stretched_limits[1] + 0.01)  # a silence past even those: dead ...
    assert b.state() == DEAD
    b.t.merge([Gossiped("b", "b.host:7070", 2, 1, ALIVE, 0.0, {})], b.now)  # ... it refutes
    assert b.state() == ALIVE
    # its new life is judged by what its link showed, not from scratch: a late beat next
    assert b.t.limits_of("b") == stretched_limits
    b.hb = 1
    b.t.merge([Gossiped("b", "b.host:7070", 2, 2, ALIVE, 0.0, {})], b.now + 2.9)
    assert b.t.get("b", b.now + 2.9).state == ALIVE


# --- the pure functions, by table ------------------------------------------------------------


def test_gap_update_starts_from_the_prior_and_follows_the_gaps() -> None:
    mean, dev, worst = gap_update(0.0, 0.0, 2.0, prior=0.5)
    assert (mean, dev) == (pytest.approx(0.6875), pytest.approx(0.375))
    assert worst == pytest.approx(worst_gap(mean, dev))
    for gap in [2.0] * 200:
        mean, dev, worst = gap_update(mean, dev, gap, prior=0.5)
    assert mean == pytest.approx(2.0) and dev == pytest.approx(0.0, abs=1e-6)
    assert worst == pytest.approx(worst_gap(mean, dev)) == pytest.approx(3.5)
    for gap in [0.1, 2.9] * 50:  # the inlined worst gap is worst_gap's, jittery gaps too
        mean, dev, worst = gap_update(mean, dev, gap, prior=0.5)
        assert worst == pytest.approx(worst_gap(mean, dev))


@pytest.mark.parametrize(
    ("mean", "dev", "worst"),
    [(0.5, 0.0, 0.875), (0.5, 0.2, 1.1), (2.0, 0.1, 3.5), (0.0, 0.0, 0.0)],
)
def test_worst_gap_is_the_mean_plus_three_deviations_at_least_a_quarter_mean(
    mean: float, dev: float, worst: float
) -> None:
    assert worst_gap(mean, dev) == pytest.approx(worst)


@pytest.mark.parametrize(
    ("worst", "expected"),
    [
        (0.9, (1.5, 2.5)),  # under the healthy gap: the thresholds themselves
        (2.0, (3.0, 5.0)),  # twice it: twice each
        (8.0, (9.0, 10.0)),  # past the cap: death at the cap, suspicion 1 s before it
    ],
)
def test_stretched_table(worst: float, expected: tuple[float, float]) -> None:
    assert stretched(1.5, 2.5, worst, healthy_gap(0.5, 0.0), 10.0) == pytest.approx(expected)


def test_a_large_swarms_allowance_counts_as_healthy_and_the_cap_never_undercuts_it() -> None:
    assert healthy_gap(0.5, 2.0) == 3.0
    assert stretched(3.5, 4.5, 2.9, 3.0, 10.0) == (3.5, 4.5)
    assert stretched(3.5, 4.5, 30.0, 3.0, 4.0) == (3.5, 4.5)  # a cap under the floor: floor


@pytest.mark.parametrize("bad", [1.0, float("nan"), -1.0, "10"])
def test_a_cap_under_dead_after_is_refused_by_name(bad: object) -> None:
    from swarmnode.gossip.errors import MembershipError
    from swarmnode.gossip.membership.config import MembershipConfig

    with pytest.raises(MembershipError, match="`dead_after_max` must be 0"):
        MembershipConfig(dead_after_max=bad).validate()
    assert MembershipConfig(dead_after_max=6.0).validate().timing.dead_after_max == 6.0
