"""The average round's delta rule: steps trained while a round is in flight survive its mix,
and two peers that push to each other at once still meet halfway (gossip/exchange/exchanger.py)."""

from __future__ import annotations

import asyncio

import numpy as np
import pytest
from swarmnode.gossip.exchange import InMemoryStore, delta_rule
from swarmnode.gossip.exchange.exchanger import ExchangeConfig, Exchanger
from swarmnode.gossip.link.inmemory import InMemoryNetwork
from swarmnode.gossip.link.transport import Arrival

from tests.gossip.exchange.exchange_fakes import FixedPeers

pytestmark = pytest.mark.timeout(30)

D = 64
PAIR = {"mode": "average", "mix": 0.5, "outer_lr": 1.0, "outer_momentum": 0.0}  # plain AD-PSGD


def exchangers(net: InMemoryNetwork, stores: list, cfg: ExchangeConfig) -> list[Exchanger]:
    def one(i: int) -> Exchanger:
        other = [(f"p{1 - i}", f"p{1 - i}:1")]
        transport = net.transport(f"p{i}:1")
        return Exchanger(
            cfg, self_id=f"p{i}", transport=transport, store=stores[i], peers=FixedPeers(other)
        )

    return [one(0), one(1)]


def pair(a: np.ndarray, b: np.ndarray, cfg: ExchangeConfig, trained: np.ndarray | None = None):
    """Two exchangers over `InMemoryStore`s; with `trained`, peer 0 "trains" by that much while its
    push to peer 1 is being answered (the round is in flight)."""
    net = InMemoryNetwork()
    stores = [InMemoryStore(a), InMemoryStore(b)]
    exs = exchangers(net, stores, cfg)
    net.register("p0:1", exs[0].handlers())
    handlers = exs[1].handlers()
    if trained is not None:
        answer = handlers["pushpull"]

        async def slow_answer(req: Arrival) -> bytes:
            stores[0].train(trained)  # training steps on peer 0 meanwhile
            return await answer(req)

        handlers = {**handlers, "pushpull": slow_answer}
    net.register("p1:1", handlers)
    return stores, exs


async def test_steps_trained_during_a_round_are_kept_whole():
    a, b, g = np.full(D, 2.0), np.full(D, 4.0), np.linspace(-0.1, 0.1, D)
    stores, (ea, _) = pair(a, b, ExchangeConfig(**PAIR), trained=g)
    assert (await ea.round()).applied
    # the average of what was sent and what came back, plus every step trained meanwhile
    np.testing.assert_allclose(stores[0].x, 0.5 * a + 0.5 * b + g, rtol=1e-6)
    # peer 1 mixed the model that was pushed, as before; the pair's sum grew by g alone
    np.testing.assert_allclose(stores[1].x, 0.5 * a + 0.5 * b, rtol=1e-6)
    np.testing.assert_allclose(stores[0].x + stores[1].x, a + b + g, rtol=1e-6)


async def test_the_replace_rule_scales_those_steps_by_one_minus_the_weight():
    a, b, g = np.full(D, 2.0), np.full(D, 4.0), np.linspace(-0.1, 0.1, D)
    stores, (ea, _) = pair(a, b, ExchangeConfig(**PAIR, delta_rule=False), trained=g)
    assert (await ea.round()).applied
    np.testing.assert_allclose(stores[0].x, 0.5 * (a + g) + 0.5 * b, rtol=1e-6)  # half of g lost


@pytest.mark.parametrize("delta_rule", [True, False])
async def test_two_peers_pushing_to_each_other_at_once_meet_halfway(delta_rule):
    # Each one's handler mixes the other's push in while its own round is in flight. Counting
    # that move as "trained meanwhile" would add the other's model twice and swap the two;
    # the rule takes it out, so both rules give AD-PSGD's a <- a/4 + 3b/4, b <- b/4 + 3a/4.
    a, b = np.full(D, 2.0), np.full(D, 4.0)
    stores, exs = pair(a, b, ExchangeConfig(**PAIR, delta_rule=delta_rule))
    results = await asyncio.wait_for(asyncio.gather(*(e.round() for e in exs)), 10)
    assert all(r.applied for r in results) and all(e.served == 1 for e in exs)
    np.testing.assert_allclose(stores[0].x, 0.25 * a + 0.75 * b, rtol=1e-6)
    np.testing.assert_allclose(stores[1].x, 0.25 * b + 0.75 * a, rtol=1e-6)


async def test_with_the_delta_rule_off_a_round_lands_as_the_plain_mix():
    a, b = np.full(D, 2.0), np.full(D, 4.0)
    net = InMemoryNetwork()
    stores = [InMemoryStore(a), InMemoryStore(b)]
    exs = exchangers(net, stores, ExchangeConfig(**PAIR, delta_rule=False))
    for i, ex in enumerate(exs):
        net.register(f"p{i}:1", ex.handlers())
    assert (await exs[0].round()).applied
    np.testing.assert_allclose(stores[0].x, 3.0)
    np.testing.assert_allclose(stores[1].x, 3.0)
    assert stores[0].calls["nudge"] == stores[1].calls["nudge"] == 0  # the plain mix never nudges


def robust_swarm(xs: list[np.ndarray], cfg: ExchangeConfig, trained: np.ndarray | None):
    """Peer 0 and four others, robust; with `trained`, peer 0 trains by that much while the
    first of its pushes is answered."""
    net = InMemoryNetwork()
    stores = [InMemoryStore(x) for x in xs]
    addrs = [f"p{i}:1" for i in range(len(xs))]
    exs = []
    for i in range(len(xs)):
        others = FixedPeers([(f"p{j}", a) for j, a in enumerate(addrs) if j != i])
        exs.append(Exchanger(cfg, self_id=f"p{i}", transport=net.transport(addrs[i]),
                             store=stores[i], peers=others))  # fmt: skip
    for i, ex in enumerate(exs):
        handlers = ex.handlers()
        if i == 1 and trained is not None:
            answer = handlers["pushpull"]

            async def slow_answer(req: Arrival, answer=answer) -> bytes:
                stores[0].train(trained)
                return await answer(req)

            handlers = {**handlers, "pushpull": slow_answer}
        net.register(addrs[i], handlers)
    return stores, exs


async def test_a_robust_round_lands_as_its_aggregate_plus_the_steps_trained_meanwhile():
    # Before, x <- agg (weight 1 for the self-centered rule) dropped every step trained during
    # the round; now x <- agg + g. The aggregate itself is the same: compared with the old rule
    # on an identical swarm that trains nothing during the round.
    rng = np.random.default_rng(0)
    xs = [rng.standard_normal(D) for _ in range(5)]
    g = np.linspace(-0.05, 0.05, D)
    cfg = dict(mode="robust", pull=4, byzantine_f=1, outer_lr=1.0, outer_momentum=0.0)
    old, (e_old, *_) = robust_swarm(xs, ExchangeConfig(**cfg, delta_rule=False), None)
    new, (e_new, *_) = robust_swarm(xs, ExchangeConfig(**cfg), g)
    assert (await e_old.round()).applied and (await e_new.round()).applied
    assert np.abs(old[0].x - xs[0]).max() > 0.05  # the round moved the model: the test shows it
    np.testing.assert_allclose(new[0].x, old[0].x + g, rtol=1e-5, atol=1e-6)


def test_the_step_overwrites_a_received_answer_and_never_a_buffer_it_may_not_write() -> None:
    """mean(answers) - sent - m in one pass: over the answer itself where it is writable (a
    received body the caller owns), into a new vector where it is not (the in-memory network's
    `bytes`) or where there are several (a float64 mean, chunk by chunk)."""
    rng = np.random.default_rng(3)
    n = 2 * delta_rule.CHUNK + 77  # a ragged last chunk
    sent = rng.standard_normal(n, dtype=np.float32)
    rows = [sent + np.float32(0.01) * rng.standard_normal(n, dtype=np.float32) for _ in range(3)]
    moved = delta_rule.Moved()
    moved.add(sent + np.float32(1.0), sent, 0.25)  # m = 0.25 everywhere
    want = np.mean(np.stack(rows).astype(np.float64), axis=0) - sent - 0.25
    got = delta_rule.step(rows, sent, moved)
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-6)
    assert not any(np.shares_memory(got, r) for r in rows)

    received = rows[0].copy()
    got = delta_rule.step([received], sent, moved)
    assert np.shares_memory(got, received)  # no copy of the answer
    np.testing.assert_allclose(got, rows[0] - sent - np.float32(0.25), rtol=0, atol=1e-6)

    frozen = rows[1].copy()
    frozen.flags.writeable = False  # np.frombuffer over `bytes`
    got = delta_rule.step([frozen], sent, moved)
    assert not np.shares_memory(got, frozen)
    np.testing.assert_array_equal(frozen, rows[1])
    np.testing.assert_allclose(got, rows[1] - sent - np.float32(0.25), rtol=0, atol=1e-6)


async def test_pushes_queued_together_during_a_round_count_the_move_each_makes():
    # Two pushes reach a peer whose round is in flight before either has landed (a busy
    # training thread, a burst of rounds at once). Each is counted against the model as it
    # will stand after the one before; the delta rule then takes out exactly what they moved.
    # Counted against the snapshot (the model without the first), m overshot the move by
    # w^2 (y1 - x) and each landing pushed the peer away from its pushers.
    x, y1, y2 = np.full(D, 1.0), np.full(D, 3.0), np.full(D, 7.0)
    store = InMemoryStore(x, queued=True)
    cfg = ExchangeConfig(mode="average", mix=0.5, push_budget=False)
    ex = Exchanger(cfg, self_id="p0", transport=InMemoryNetwork().transport("p0:1"),
                   store=store, peers=FixedPeers([]))  # fmt: skip
    moved = ex.pushes.in_flight = delta_rule.Moved()
    await ex.mode_round.take_push(y1.astype(np.float32), "p1")
    await ex.mode_round.take_push(y2.astype(np.float32), "p2")
    assert store.calls["mix_in"] == 2 and not store.landed  # both queued, neither landed
    store.land()
    counted = np.zeros(D, np.float32)
    moved.take_from(counted)
    assert (store.x > x).all()  # both moved it, toward the pushers
    np.testing.assert_allclose(-counted, store.x - x, rtol=1e-6)
