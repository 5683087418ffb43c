"""Issue 31, goal 5: deadlines that tune themselves. A proven partner's push-pull gets the
deadline its link's figures call for (bytes / throughput x margin + rtt, within [floor, the
fixed `exchange-timeout`]); lateness backs a partner off from sampling (fake clock)."""

from __future__ import annotations

import random

import pytest
from swarmnode.gossip.link.backoff import BULK, LATE_BASE_S, LATE_CAP_S, Backoff
from swarmnode.gossip.link.inmemory import InMemoryNetwork
from swarmnode.gossip.link.stats import (
    FIXED_DEADLINE_ENV,
    SMALL_BYTES,
    TUNE_FLOOR_S,
    TUNE_MARGIN,
    LinkStat,
    MeasuringTransport,
    exchange_deadline,
)

from tests.gossip.membership.membership_harness import FakeClock

pytestmark = pytest.mark.timeout(30)

MB = 1_000_000
CAP = 120.0


@pytest.mark.parametrize(
    ("nbytes", "rtt_s", "bps", "want"),
    [
        # 2 x 100 MB on loopback (~8 Gbit/s measured): the floor, not the cap
        (200 * MB, 0.0002, 8e9, TUNE_FLOOR_S),
        # 2 x 100 MB at 20 Mbit/s: 80 s of transfer, x margin, is more than the cap: the cap
        (200 * MB, 0.02, 20e6, CAP),
        # 2 x 10 MB at 20 Mbit/s: 8 s x margin + rtt
        (20 * MB, 0.02, 20e6, TUNE_MARGIN * 8.0 + 0.02),
        # 2 x 10 MB at 1 Gbit/s over 50 ms: 0.16 s x margin + rtt is under the floor
        (20 * MB, 0.05, 1e9, TUNE_FLOOR_S),
        # 2 x 10 MB at 100 Mbit/s over 50 ms: 1.6 s x margin + rtt
        (20 * MB, 0.05, 100e6, TUNE_MARGIN * 1.6 + 0.05),
        # a large body on a link with no throughput measured yet: the cap
        (20 * MB, 0.02, None, CAP),
        # a small model's exchange is timed as a round trip: margin x rtt, floored
        (SMALL_BYTES - 1, 0.5, None, TUNE_MARGIN * 0.5),
        (SMALL_BYTES - 1, 0.001, None, TUNE_FLOOR_S),
        (SMALL_BYTES - 1, None, None, CAP),
    ],
)
def test_the_exchange_deadline_follows_the_link(nbytes, rtt_s, bps, want) -> None:
    assert exchange_deadline(nbytes, rtt_s, bps, CAP) == pytest.approx(want)


def test_a_small_cap_still_caps() -> None:
    assert exchange_deadline(20 * MB, 0.02, 20e6, 5.0) == 5.0


def test_a_proven_partners_push_pull_gets_its_links_deadline_others_keep_theirs() -> None:
    t = MeasuringTransport(InMemoryNetwork().transport("a:1"))
    t.links["fast:1"] = LinkStat("fast:1", rtt_s=0.001, throughput_bps=8e9)
    t.links["slow:1"] = LinkStat("slow:1", rtt_s=0.02, throughput_bps=20e6)
    for addr in ("fast:1", "slow:1"):
        t.backoff.answered(addr, BULK)
    body = 10 * MB
    assert t.tuned_deadline("fast:1", "pushpull", CAP, body) == TUNE_FLOOR_S
    assert t.tuned_deadline("slow:1", "pushpull", CAP, body) == pytest.approx(
        TUNE_MARGIN * 8.0 + 0.02
    )
    # pulls (state sync waits long on purpose) and unknown partners keep the caller's
    assert t.tuned_deadline("fast:1", "params", CAP, body) == CAP
    assert t.tuned_deadline("new:1", "pushpull", CAP, body) == CAP


def test_lateness_backs_off_doubling_and_an_answer_in_time_ends_it() -> None:
    clock = FakeClock(0.0)
    b = Backoff(clock=clock, rng=random.Random(1))
    b.answered("s:1", BULK)
    waits = []
    for _ in range(6):
        b.late("s:1", BULK)
        t0 = clock.t
        while b.waiting("s:1", BULK):
            clock.advance(0.05)
        waits.append(clock.t - t0)
    for n, w in enumerate(waits):  # base x 2^(n-1), jittered into its upper half, capped
        full = min(LATE_CAP_S, LATE_BASE_S * 2.0**n)
        assert full / 2 - 0.1 <= w <= full + 0.1, (n, w)
    assert b.proven("s:1", BULK) and b.streak("s:1", BULK) == 0  # slow is not failed
    b.late("s:1", BULK)
    b.on_time("s:1", BULK)
    assert not b.waiting("s:1", BULK) and b.late_streak("s:1", BULK) == 0


def test_the_benchmark_switch_keeps_the_fixed_deadline(monkeypatch) -> None:
    """`SNBENCH_FIXED_DEADLINE=1` (lab runs only) gives a proven partner the caller's
    deadline, as before the tuning; any other value leaves the tuning on."""
    monkeypatch.setenv(FIXED_DEADLINE_ENV, "1")
    fixed = MeasuringTransport(InMemoryNetwork().transport("a:1"))
    monkeypatch.setenv(FIXED_DEADLINE_ENV, "0")
    tuned = MeasuringTransport(InMemoryNetwork().transport("b:1"))
    for t in (fixed, tuned):
        t.links["fast:1"] = LinkStat("fast:1", rtt_s=0.001, throughput_bps=8e9)
        t.backoff.answered("fast:1", BULK)
    assert fixed.tuned_deadline("fast:1", "pushpull", CAP, 10 * MB) == CAP
    assert tuned.tuned_deadline("fast:1", "pushpull", CAP, 10 * MB) == TUNE_FLOOR_S
