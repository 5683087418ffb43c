"""A member lying about its reachability (issue 31's hostile inputs): one that says it can be
dialled and cannot costs a round at most its grace and is sampled less and less; one that says
it is outbound-only and is not gains nothing (it serves no rounds, but it is judged by the same
clock as any member, and each of its own push-pulls gives its model as it takes one). The
exchange's sampler over membership (node/peer/limits.py), on the in-memory network, with a
fake clock for the back-offs."""

from __future__ import annotations

import asyncio
import random
import time
from types import SimpleNamespace

import numpy as np
import pytest
from swarmnode.gossip.exchange.exchanger import ExchangeConfig, Exchanger
from swarmnode.gossip.exchange.memory_store import InMemoryStore
from swarmnode.gossip.link.backoff import BULK, Backoff
from swarmnode.gossip.link.inmemory import InMemoryNetwork
from swarmnode.gossip.link.stats import MeasuringTransport
from swarmnode.gossip.link.transport import Arrival
from swarmnode.gossip.membership import ALIVE, OUTBOUND, REACH
from swarmnode.gossip.membership.entries import Gossiped
from swarmnode.gossip.membership.table import MemberTable, Timing
from swarmnode.node.peer.limits import MembershipPeers

from tests.gossip.membership.membership_harness import FakeClock

pytestmark = pytest.mark.timeout(60)

D = 64
ROUNDS = 30


class Table:
    """The membership the sampler reads: these members, all alive."""

    def __init__(self, members: dict[str, tuple[str, dict]]) -> None:
        self.members = members

    def live_peers(self) -> list[SimpleNamespace]:
        return [
            SimpleNamespace(peer_id=pid, addr=addr, meta=meta, state=ALIVE)
            for pid, (addr, meta) in self.members.items()
        ]

    def get(self, peer_id: str) -> SimpleNamespace | None:
        return next((m for m in self.live_peers() if m.peer_id == peer_id), None)


def _peer(net: InMemoryNetwork, i: int, members: Table, clock: FakeClock) -> Exchanger:
    links = MeasuringTransport(net.transport(f"p{i}:1"), Backoff(clock=clock, rng=random.Random(i)))
    ex = Exchanger(
        ExchangeConfig(mode="average", group=3, timeout=5.0),
        self_id=f"p{i}",
        transport=links,
        store=InMemoryStore(np.full(D, float(i))),
        peers=MembershipPeers(members, random.Random(i), links),
    )
    net.register(f"p{i}:1", ex.handlers())
    return ex


async def test_a_member_that_says_it_is_dialable_and_is_not_costs_a_grace_and_is_sampled_less():
    net, clock = InMemoryNetwork(), FakeClock()

    async def black_hole(req: Arrival) -> bytes:  # a NAT's inside address: nothing answers
        await asyncio.Event().wait()
        return b""

    net.register("liar:1", {"pushpull": black_hole, "params": black_hole})
    members = Table({f"p{i}": (f"p{i}:1", {}) for i in (1, 2)} | {"liar": ("liar:1", {})})
    me = _peer(net, 0, members, clock)
    for i in (1, 2):
        _peer(net, i, Table({"p0": ("p0:1", {})}), clock)
    asked, took = [], []
    for _ in range(ROUNDS):
        t0 = time.perf_counter()
        r = await me.round()
        took.append(time.perf_counter() - t0)
        assert r.applied and {"p1", "p2"} <= set(r.received)  # the honest ones, every round
        asked.append("liar" in r.asked)
        clock.advance(1.0)  # a round a second
    # each round it was in cost the grace after the others' answers (at least 0.1 s), never
    # the 5 s deadline; and its back-off doubles with each try (1, 2, 4 ... s): few tries
    assert max(took) < 1.5, took
    assert 2 <= sum(asked) <= 8, asked
    assert sum(asked[ROUNDS // 2 :]) <= 2, asked  # rarer and rarer
    assert me.peers.links.backoff.streak("liar:1", BULK) == sum(asked)


async def test_a_member_that_says_it_is_outbound_only_and_is_not_gains_nothing():
    net, clock = InMemoryNetwork(), FakeClock()
    members = Table({"p1": ("p1:1", {}), "p2": ("p2:1", {REACH: OUTBOUND})})
    me = _peer(net, 0, members, clock)
    _peer(net, 1, Table({"p0": ("p0:1", {})}), clock)
    liar = _peer(net, 2, Table({"p0": ("p0:1", {})}), clock)  # it can be dialled, says not
    for _ in range(5):
        r = await me.round()
        assert r.asked == ["p1"]  # never asked: it takes no part in my rounds ...
    served = me.served
    before = me.store.x.copy()
    r = await liar.round()  # ... and what it takes from me in its own, it gives me too
    assert r.received == ["p0"] and me.served == served + 1
    assert not np.array_equal(me.store.x, before)


def test_an_outbound_only_member_is_judged_by_the_same_clock() -> None:
    # saying "do not dial me" buys no leniency from the failure detector: its silence counts
    # as any member's, and it is dead on the same timer
    t = MemberTable("me", "me:1", 1, Timing(1.5, 2.5, 60.0, 0.5, 3))
    now = 100.0
    for hb in range(1, 20):
        t.merge(
            [
                Gossiped("out", "out:1", 1, hb, ALIVE, 0.0, {REACH: OUTBOUND}),
                Gossiped("direct", "direct:1", 1, hb, ALIVE, 0.0, {}),
            ],
            now,
        )
        now += 0.5
    assert t.limits_of("out") == t.limits_of("direct") == (1.5, 2.5)
    states = {pid: t.get(pid, now + 2.5).state for pid in ("out", "direct")}
    assert states == {"out": "dead", "direct": "dead"}
