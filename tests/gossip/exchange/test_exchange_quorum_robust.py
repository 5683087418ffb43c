"""A slow partner costs a robust round at most its grace, as it costs an average round
(test_exchange_quorum.py): the pull-only path (rules that are not self-centered: Krum, median,
...) lands with the partners that answered once a quorum did and the grace passed; the late one
is dropped and sampled less. The rule's bound holds: a round left with fewer models than the
rule needs is skipped, never aggregated over too few."""

from __future__ import annotations

import asyncio
import time

import numpy as np
import pytest
from swarmnode.gossip.exchange.exchanger import ExchangeConfig, Exchanger
from swarmnode.gossip.exchange.memory_store import InMemoryStore
from swarmnode.gossip.link.backoff import BULK
from swarmnode.gossip.link.inmemory import InMemoryNetwork
from swarmnode.gossip.link.stats import MeasuringTransport
from swarmnode.gossip.link.transport import Arrival

from tests.gossip.exchange.exchange_fakes import FixedPeers

pytestmark = pytest.mark.timeout(30)

D = 64
SLOW_S = 1.8


def _swarm(
    rule: str, slow_now: list[bool], n: int = 5, **cfg_kw: object
) -> tuple[list[Exchanger], list[MeasuringTransport]]:
    """n robust peers pulling n - 1 each; the last serves its model after SLOW_S while
    `slow_now[0]` (correct, late: a slow box or link)."""
    net = InMemoryNetwork()
    addrs = [f"p{i}:1" for i in range(n)]
    exs, links = [], []
    for i in range(n):
        t = MeasuringTransport(net.transport(addrs[i]))
        others = [(f"p{j}", a) for j, a in enumerate(addrs) if j != i]
        cfg = ExchangeConfig(
            mode="robust", aggregator=rule, byzantine_f=1, pull=n - 1, timeout=5.0, **cfg_kw
        )
        ex = Exchanger(
            cfg, self_id=f"p{i}", transport=t, store=InMemoryStore(np.full(D, float(i))),
            peers=FixedPeers(others),
        )  # fmt: skip
        handlers = ex.handlers()
        if i == n - 1:
            inner = handlers["params"]

            async def late(req: Arrival, inner=inner) -> bytes:
                if slow_now[0]:
                    await asyncio.sleep(SLOW_S)
                return await inner(req)

            handlers = {**handlers, "params": late}
        net.register(addrs[i], handlers)
        exs.append(ex)
        links.append(t)
    return exs, links


async def _timed(ex: Exchanger):
    t0 = time.perf_counter()
    r = await ex.round()
    return r, time.perf_counter() - t0


async def test_a_slow_partner_costs_a_pull_round_one_grace_and_is_then_sampled_less() -> None:
    slow_now = [False]
    exs, links = _swarm("median", slow_now)  # median, f = 1: 3 models needed, 5 asked for
    first = await exs[0].round()  # p4 answers in time once: proven
    assert first.applied and sorted(first.received) == ["p1", "p2", "p3", "p4"]
    slow_now[0] = True
    r, took = await _timed(exs[0])
    assert r.applied and sorted(r.received) == ["p1", "p2", "p3"] and "p4" in r.failures
    assert "grace" in r.failures["p4"]
    assert took < 1.0  # not the slow partner's 1.8 s
    backoff = links[0].backoff
    assert backoff.proven("p4:1", BULK) and backoff.late_streak("p4:1", BULK) == 1
    assert backoff.waiting("p4:1", BULK)  # kept out of sampling for a while
    assert backoff.late_streak("p1:1", BULK) == 0


async def test_a_round_left_with_fewer_models_than_the_rule_needs_is_skipped_not_shrunk() -> None:
    # Krum with f = 1 needs n >= 2f + 3 = 5 models: own and all four partners. Without the
    # slow one after the grace, 4 remain: the round is skipped, the model untouched.
    slow_now = [False]
    exs, _ = _swarm("krum", slow_now)
    assert (await exs[0].round()).applied
    before = exs[0].store.x.copy()
    slow_now[0] = True
    r, took = await _timed(exs[0])
    assert not r.applied and "needs 5" in r.note and "skipped" in r.note
    assert took < 1.0
    np.testing.assert_array_equal(exs[0].store.x, before)


async def test_shrinking_f_when_short_is_the_operators_choice_and_is_said() -> None:
    slow_now = [False]
    exs, _ = _swarm("krum", slow_now, on_short="shrink")
    assert (await exs[0].round()).applied
    slow_now[0] = True
    r, _ = await _timed(exs[0])
    assert r.applied and "f=0 instead of 1" in r.note


async def test_the_slow_member_still_trains_with_the_swarm_in_robust_mode() -> None:
    exs, _ = _swarm("median", [True])
    r = await exs[4].round()  # its own pulls ask the fast ones, who answer at once
    assert r.applied and sorted(r.received) == ["p0", "p1", "p2", "p3"]
    assert float(exs[4].store.x.max()) < 4.0
