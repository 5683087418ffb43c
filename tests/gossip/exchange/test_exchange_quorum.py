"""Issue 31, goal 4: a slow partner costs at most its grace. A group round lands with the
partners that answered once a quorum did and the grace after it passed; the late one is dropped
and sampled less (gossip/link/backoff.py, `late`), and an answer in time ends that."""

from __future__ import annotations

import asyncio
import time

import numpy as np
import pytest
from swarmnode.gossip.exchange.exchanger import (
    QUORUM_FACTOR,
    QUORUM_MIN_S,
    ExchangeConfig,
    Exchanger,
    _answers,
    quorum_grace,
)
from swarmnode.gossip.exchange.memory_store import InMemoryStore
from swarmnode.gossip.link.backoff import BULK
from swarmnode.gossip.link.inmemory import InMemoryNetwork
from swarmnode.gossip.link.stats import MeasuringTransport
from swarmnode.gossip.link.transport import Arrival

from tests.gossip.exchange.exchange_fakes import FixedPeers

pytestmark = pytest.mark.timeout(30)

D = 64
SLOW_S = 1.8


@pytest.mark.parametrize(
    ("times", "grace"),
    [
        ([0.01], QUORUM_MIN_S),  # a fast loopback: the floor
        ([0.04, 0.06], QUORUM_MIN_S),  # median 0.05 x 2 = the floor
        ([0.1, 0.3], QUORUM_FACTOR * 0.2),  # the median of two: their mean
        ([0.2, 0.25, 5.0], QUORUM_FACTOR * 0.25),  # one slow answer does not stretch it
    ],
)
def test_the_grace_is_a_multiple_of_the_median_answer_time_with_a_floor(times, grace) -> None:
    assert quorum_grace(times) == pytest.approx(grace)


async def _after(delay: float, value: object) -> object:
    await asyncio.sleep(delay)
    if isinstance(value, BaseException):
        raise value
    return value


async def test_answers_wait_for_a_quorum_then_one_grace_and_cancel_the_rest() -> None:
    tasks = [asyncio.ensure_future(_after(d, d)) for d in (0.02, 0.03, SLOW_S)]
    t0 = time.perf_counter()
    out = await _answers(tasks, [], cut=False)
    took = time.perf_counter() - t0
    assert out[:2] == [0.02, 0.03] and isinstance(out[2], asyncio.CancelledError)
    assert took < 0.03 + QUORUM_MIN_S + 0.15  # the quorum's time and one grace, not 1.8 s


async def test_failures_do_not_count_towards_the_quorum() -> None:
    # one failed at once and one answered: 1 answer of 3 is no quorum, the third is awaited
    tasks = [
        asyncio.ensure_future(_after(0.0, RuntimeError("gone"))),
        asyncio.ensure_future(_after(0.01, "a")),
        asyncio.ensure_future(_after(0.3, "b")),
    ]
    out = await _answers(tasks, [], cut=False)
    assert isinstance(out[0], RuntimeError) and out[1:] == ["a", "b"]


def _swarm(
    slow: set[int], n: int = 4, slow_now: list[bool] | None = None
) -> tuple[list[Exchanger], list[MeasuringTransport]]:
    slow_now = [True] if slow_now is None else slow_now
    net = InMemoryNetwork()
    addrs = [f"p{i}:1" for i in range(n)]
    exs, links = [], []
    for i in range(n):
        t = MeasuringTransport(net.transport(addrs[i]))
        others = [(f"p{j}", a) for j, a in enumerate(addrs) if j != i]
        cfg = ExchangeConfig(mode="average", group=n - 1, timeout=5.0)
        ex = Exchanger(
            cfg, self_id=f"p{i}", transport=t, store=InMemoryStore(np.full(D, float(i))),
            peers=FixedPeers(others),
        )  # fmt: skip
        handlers = ex.handlers()
        if i in slow:  # answers correctly, after SLOW_S (as a slow box or link would)
            inner = handlers["pushpull"]

            async def late(req: Arrival, inner=inner) -> bytes:
                if slow_now[0]:
                    await asyncio.sleep(SLOW_S)
                return await inner(req)

            handlers = {**handlers, "pushpull": late}
        net.register(addrs[i], handlers)
        exs.append(ex)
        links.append(t)
    return exs, links


async def test_a_slow_partner_costs_one_grace_and_is_then_sampled_less() -> None:
    slow_now = [False]
    exs, links = _swarm(slow={3}, slow_now=slow_now)
    first = await exs[0].round()  # p3 answers in time once: proven
    assert sorted(first.received) == ["p1", "p2", "p3"]
    slow_now[0] = True  # then its box slows down
    t0 = time.perf_counter()
    r = await exs[0].round()
    took = time.perf_counter() - t0
    assert r.applied and sorted(r.received) == ["p1", "p2"] and "p3" in r.failures
    assert took < 1.0  # not the slow partner's 1.8 s
    backoff = links[0].backoff
    assert backoff.proven("p1:1", BULK) and backoff.late_streak("p1:1", BULK) == 0
    # late, not failed: still proven (honest, slow), kept out of sampling for a while
    assert backoff.proven("p3:1", BULK) and backoff.late_streak("p3:1", BULK) == 1
    assert backoff.waiting("p3:1", BULK) and links[0].links["p3:1"].failures == 0
    slow_now[0] = False
    r = await exs[0].round()  # (this test's sampler ignores back-offs) an answer in time
    assert "p3" in r.received and not backoff.waiting("p3:1", BULK)


async def test_the_slow_member_still_trains_with_the_swarm() -> None:
    # its own rounds ask the fast ones, who answer at once: it mixes with everyone
    exs, _ = _swarm(slow={3})
    r = await exs[3].round()
    assert r.applied and sorted(r.received) == ["p0", "p1", "p2"]
    assert float(exs[3].store.x.max()) < 3.0  # moved towards the others' (0, 1, 2)
