"""A pushpull over HTTP (the node: `mix_after_answer`) answers first, then bounds and mixes the
pushed model (against its own model as it is after the answer's snapshot, read in place); the
bound still holds."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from swarmnode.gossip.exchange import InMemoryStore
from swarmnode.gossip.exchange.exchanger import ExchangeConfig, Exchanger
from swarmnode.gossip.link.inmemory import InMemoryNetwork
from swarmnode.gossip.link.transport import Arrival
from swarmnode.gossip.robust.consensus import cut_away
from swarmnode.gossip.wire import frames as wire

from tests.gossip.exchange.exchange_fakes import FixedPeers

pytestmark = pytest.mark.timeout(30)

D = 1000


def mixed(store: InMemoryStore) -> list[tuple[np.ndarray, float]]:
    """The mixes queued so far: the store is `queued`, so none has landed (no training step)."""
    return [(c.other, c.weight) for c in store.pending if c.kind == "mix"]


def snapshots(store: InMemoryStore) -> int:
    return store.calls["snapshot"] + store.calls["snapshot_frame"]


def _node(x: np.ndarray) -> Exchanger:
    return Exchanger(
        ExchangeConfig(mode="average", mix=0.5),
        self_id="me",
        transport=InMemoryNetwork().transport("me:1"),
        store=InMemoryStore(x, queued=True),  # the node's shape: mixes only queued
        peers=FixedPeers(),
        mix_after_answer=True,
    )


async def test_the_answer_is_a_framed_snapshot_and_the_mix_follows_it() -> None:
    ex = _node(np.ones(D))
    theirs = np.full(D, 1.5, np.float32)  # |theirs - own| ~ 16 < 4 |own| ~ 126: mixed in full
    reply = await ex.handlers()["pushpull"](
        Arrival(wire.encode_params(theirs, sender="p1", step=3))
    )
    _, mine = wire.decode_params(reply)
    np.testing.assert_array_equal(mine, 1.0)
    await ex.settle()
    store = ex.store
    assert snapshots(store) == 1  # the answer's; the bound measures my model in place
    assert (
        store.calls["distance"] + store.calls["norm"] >= 1
    )  # its norm (no radius yet) and the distance of the push
    assert len(mixed(store)) == 1 and mixed(store)[0][1] == 0.5
    np.testing.assert_array_equal(mixed(store)[0][0], theirs)


async def test_a_far_push_is_still_refused_when_mixed_after_answering() -> None:
    ex = _node(np.ones(D))
    far = np.full(D, 1e4, np.float32)
    reply = await ex.handlers()["pushpull"](Arrival(wire.encode_params(far, sender="liar", step=3)))
    assert wire.decode_params(reply)[1][0] == 1.0
    await ex.settle()
    assert mixed(ex.store) == [] and ex.guard.refused == 1


@pytest.mark.parametrize("budget, share", [(True, 0.5), (False, 1.0)])
async def test_a_push_to_clip_is_mixed_in_place_at_a_smaller_weight(budget, share) -> None:
    """Within the clip bound a push is mixed as it came and beyond the drop bound refused; in
    between it is clipped, all judged by its distance to my model read in place: own + s (y -
    own) mixed at w is y mixed at w s, so no snapshot of my model is taken. The bound is the
    radius tau, and half of it with issue 22's bounds on (`PUSH_CLIP_SHARE`)."""
    ex = _node(np.ones(D))
    ex.cfg = ex.mode_round.cfg = dataclasses.replace(ex.cfg, push_budget=budget)
    tau = 4 * np.sqrt(D)  # before my first round: 4 |own|
    pushed = np.full(D, 9.0, np.float32)  # |pushed - own| = 8 sqrt(D) = 2 tau
    await ex.handlers()["pushpull"](Arrival(wire.encode_params(pushed, sender="p1", step=3)))
    await ex.settle()
    store = ex.store
    assert snapshots(store) == 1  # the answer's only
    ((got, weight),) = mixed(store)
    np.testing.assert_array_equal(got, pushed)
    assert ex.guard.refused == 0
    assert weight == pytest.approx(0.5 * share * tau / (8 * np.sqrt(D)))


async def _push(ex: Exchanger, theirs: np.ndarray, sender: str) -> None:
    await ex.handlers()["pushpull"](Arrival(wire.encode_params(theirs, sender=sender, step=3)))
    await ex.settle()


async def test_the_push_budget_holds_on_the_in_place_path() -> None:
    """A sender's second push in one own round is answered, not mixed, and costs no snapshot;
    a mixed push spends its travel (issue 22's budget on issue 25's in-place path)."""
    ex = _node(np.ones(D))
    close = np.full(D, 1.5, np.float32)
    await _push(ex, close, "p1")
    await _push(ex, close, "p1")  # the burst: two pushes banked
    await _push(ex, close, "p1")  # no credit left this round
    store = ex.store
    assert len(mixed(store)) == 2 and snapshots(store) == 3  # the three answers' snapshots only
    assert ex.budget.over_rate == 1
    assert ex.budget.travelled("p1") == pytest.approx(2 * 0.5 * 0.5 * np.sqrt(D), rel=1e-5)
    ex.budget.own_round()
    await _push(ex, close, "p1")
    assert len(mixed(store)) == 3


async def test_a_push_away_from_the_consensus_is_cut_against_a_snapshot() -> None:
    """Where the swarm was (the consensus) is behind me, along e0: a push that goes on past me
    along e0 is cut (my model is needed: a snapshot); one that moves sideways is mixed in place.
    The decision is made from three distances, without my model."""
    x = np.zeros(D, np.float32)
    x[0] = 1.0
    ex = _node(x)
    ex.mode_round.consensus = np.zeros(D, np.float32)  # 1.0 behind me along e0
    ex.guard.record([2.0, 2.0, 2.0])  # typical distance 2: away limit 0.5 x 2 = 1, tau 8
    sideways = x.copy()
    sideways[1] = 3.0
    await _push(ex, sideways, "p1")
    store = ex.store
    assert snapshots(store) == 1 and len(mixed(store)) == 1  # in place: the answer's snapshot only
    np.testing.assert_array_equal(mixed(store)[0][0], sideways)
    onward = x.copy()
    onward[0] = 4.0  # 3 past me, away from the consensus: cut to 1
    await _push(ex, onward, "p2")
    assert snapshots(store) == 3 and len(mixed(store)) == 2  # my own snapshot for the cut
    np.testing.assert_allclose(mixed(store)[1][0][0], 2.0, rtol=1e-5)


async def test_the_in_place_consensus_test_agrees_with_the_cut() -> None:
    """Random models, pushes along and against the line from the consensus to me: the in-place
    test says "cut" exactly where `cut_away` cuts (both outcomes met)."""
    seen = set()
    for seed in range(40):
        rng = np.random.default_rng(seed)
        own = rng.standard_normal(D).astype(np.float32)
        ex = _node(own)
        consensus = own - rng.standard_normal(D).astype(np.float32) * rng.uniform(0.01, 0.1)
        ex.mode_round.consensus = consensus
        ex.guard.record([float(rng.uniform(0.5, 4))] * 3)
        along = rng.uniform(-2, 30) * (own - consensus)
        theirs = own + along + 0.02 * rng.standard_normal(D).astype(np.float32)
        dist = float(np.linalg.norm((theirs - own).astype(np.float64)))
        inside = await ex.mode_round._within_consensus(theirs, dist)
        cut = cut_away(own, theirs, consensus, ex.mode_round.away_limit())
        assert inside == (cut is theirs), seed
        seen.add(inside)
    assert seen == {True, False}
