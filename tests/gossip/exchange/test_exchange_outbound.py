"""Outbound-only partners (issue 31): a round draws them without dialling them, and the model
each pushes next answers it, so the push bound, the consensus and the mean include them."""

from __future__ import annotations

import asyncio
import random

import numpy as np
import pytest
from swarmnode.gossip.exchange import InMemoryStore
from swarmnode.gossip.exchange.exchanger import ExchangeConfig, Exchanger
from swarmnode.gossip.exchange.outbound import MAX_TRACKED, PushDistances
from swarmnode.gossip.link.inmemory import InMemoryNetwork

from tests.gossip.exchange.exchange_fakes import FixedPeers
from tests.gossip.exchange.test_exchange import D
from tests.waiting import eventually

pytestmark = pytest.mark.timeout(30)


class FakeClock:
    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


def test_a_push_stands_for_its_sender_while_fresh_and_a_bad_one_is_forgotten():
    clock = FakeClock()
    seen = PushDistances(fresh_s=30.0, clock=clock)
    seen.pushed("o", 0.5)
    clock.t = 10.0
    seen.pushed("p", 0.25)
    assert seen.fresh() == {"o", "p"}
    assert seen.of(["o", "p", "never"]) == [0.5, 0.25] and seen.drawn == 2
    clock.t = 35.0  # o's push is 35 s old: o is not drawn, and a draw of it gives nothing
    assert seen.fresh() == {"p"} and seen.of(["o"]) == []
    seen.pushed("p", float("nan"))  # a non-finite push says nothing of where p is
    assert seen.fresh() == set()
    for i in range(MAX_TRACKED + 5):  # bounded: the oldest senders are forgotten first
        seen.pushed(f"s{i}", 1.0)
    assert len(seen.fresh()) == MAX_TRACKED and "s0" not in seen.fresh()


class SplitPeers(FixedPeers):
    """The reachable peers' directory: dialable partners and outbound-only ones, drawn as one
    pool (what `node.peer.limits.MembershipPeers.sample_partners` does over membership)."""

    def __init__(self, dial: list[tuple[str, str]], outbound: list[str]) -> None:
        super().__init__(dial)
        self.outbound, self.rng = outbound, random.Random(0)

    def sample_partners(self, k: int, awaitable):
        out = [pid for pid in self.outbound if pid in awaitable]
        total = len(self.peers) + len(out)
        drawn = sum(i >= len(self.peers) for i in self.rng.sample(range(total), min(k, total)))
        return self.sample(k - drawn), self.rng.sample(out, drawn)


def _swarm(split: bool) -> tuple[list[Exchanger], list[InMemoryStore]]:
    """a and b reachable, `home` outbound-only: it dials them, they never dial it."""
    net = InMemoryNetwork()
    rng = np.random.default_rng(0)
    stores = [InMemoryStore(rng.normal(0, 0.001, D)) for _ in range(2)]
    stores.append(InMemoryStore(np.full(D, 0.05)))  # home: far from a and b (|.| 0.8)
    names, addrs = ["a", "b", "home"], ["a:1", "b:1", "home:1"]
    exs = []
    for i, name in enumerate(names):
        dial = [(names[j], addrs[j]) for j in (0, 1) if j != i]
        peers = SplitPeers(dial, ["home"]) if split and name != "home" else FixedPeers(dial)
        cfg = ExchangeConfig(mode="average", group=2)
        ex = Exchanger(cfg, self_id=name, transport=net.transport(addrs[i]), store=stores[i],
                       peers=peers)  # fmt: skip
        net.register(addrs[i], ex.handlers())
        exs.append(ex)
    return exs, stores


# each peer's own data: a quadratic loss whose minimum is its target (home's shard is elsewhere)
TARGETS = [np.full(D, -0.001), np.full(D, 0.001), np.full(D, 0.05)]


def _train(stores: list[InMemoryStore], rng: np.random.Generator) -> None:
    """A few local steps between rounds: each peer moves half of the way to its own target (a
    peer whose model the others never mix in stays where its own data pulls it)."""
    for s, target in zip(stores, TARGETS, strict=True):
        s.land()
        s.train(0.5 * (target - s.x) + rng.normal(0, 0.0005, D))


async def _run(split: bool) -> tuple[list[int], int, Exchanger]:
    """a and b converge, then home pushes with every round: a's refusals after each round, and
    the rounds of a's that home answered."""
    exs, stores = _swarm(split)
    a, b, home = exs
    rng = np.random.default_rng(1)
    for _ in range(6):  # a and b converge: their push radius is a few of their distances
        await a.round()
        await b.round()
        _train(stores, rng)
    assert a.guard.radius() < 0.5 < np.linalg.norm(stores[2].x - stores[0].x)
    await home.round()  # its first pushes: now a and b know it pushes to them
    refused, answered = [], 0
    for _ in range(20):
        # a's round is out when home pushes (an outbound-only peer pushes at its own pace)
        mine = asyncio.ensure_future(a.round())
        if split:
            await eventually(lambda: "home" in a._awaited, 5, "a's round to await home")
        await home.round()
        answered += "home" in (await mine).received
        await b.round()
        _train(stores, rng)
        refused.append(a.guard.refused)
    return refused, answered, a


async def test_an_outbound_only_peer_answers_the_rounds_that_draw_it_by_its_next_push():
    # the bug: nobody's round includes home, so its pushes are judged by a radius of a's and
    # b's distances alone and refused, every one of them, and home's data never reaches them
    refused, answered, a = await _run(split=False)
    assert refused == list(range(1, 21)) and answered == 0, refused  # (the 1st: no radius yet)
    plain = a.guard.radius()
    # drawn without being dialled, home answers a's rounds by the model it pushes meanwhile:
    # in a's radius (and the bound on answers, the mean, the consensus) as a dialled partner is
    refused, answered, a = await _run(split=True)
    assert answered >= 18 and not a._awaited
    assert a.guard.radius() > 1.5 * plain, (a.guard.radius(), plain)
    assert refused[-1] < 10, refused


async def test_a_drawn_peer_whose_push_comes_late_answers_for_the_radius_by_its_latest():
    exs, stores = _swarm(split=True)
    a, b, home = exs
    rng = np.random.default_rng(2)
    for _ in range(2):
        await a.round()
        await b.round()
        _train(stores, rng)
    far = np.linalg.norm(stores[2].x - stores[0].x)  # the model home pushes next
    await home.round()  # pushed once: a knows how far it is
    r = await a.round()  # draws home, which pushes nothing meanwhile: the grace cuts it
    assert "home" in r.asked and "home" in r.failures and "home" not in r.received
    assert a.mode_round.seen.drawn == 1 and not a._awaited
    # its distance (to a's model when it pushed) is in a's window beside a's to b
    assert max(a.guard._dists) == pytest.approx(far, rel=0.3), list(a.guard._dists)
