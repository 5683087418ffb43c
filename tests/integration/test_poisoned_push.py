"""Issue 10, item 7: a pushed model moves an honest peer by a bounded step, in `average` mode too.

The attack that worked: pull x from /v1/params, set every hidden bias to -1e4 (the target t),
push 2 t - x to `pushpull`. An unbounded receiver mixes it at 1/2 and lands on t; its next
rounds spread t to the rest of the swarm. Three real peers (`Node`s, aiohttp on 127.0.0.1,
training on digits) take the push from a byzantine member (it holds a member's key and signs
as that member: pushing in another's name is refused, test_hostile_exchange.py); the honest
peers' accuracy must not fall by more than a point. A push by a non-member is refused (403).

`unguarded` runs the same attack with the bound switched off (the exchange as it was): it shows
the test sees the attack (the figures for docs/benchmarks.md come from both).
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import AsyncIterator
from statistics import mean

import aiohttp
import numpy as np
import pytest
from swarmnode.gossip.wire.control import encode_control
from swarmnode.gossip.wire.frames import decode_params, encode_params
from swarmnode.node.peer.node import Node

from tests.integration.inprocess import peer_config
from tests.integration.member_client import MemberClient
from tests.waiting import eventually

pytestmark = [pytest.mark.slow, pytest.mark.timeout(240)]

WARM_STEPS = 400  # steps every peer trains before the attack (digits MLP: ~90% by then)
EVALS = 3  # evaluations averaged into one accuracy (one of 360 images moves by ~0.3 points)
ROUNDS_AFTER = 4  # own exchange rounds every peer runs after the push before "after" is measured
# ... and at least this many steps: with the step limit (--max-lead, issue 21) 4 rounds are
# 40-80 steps, where they were hundreds; at 40-80 the digits MLP (~86%, still learning) moved
# by +-1 point between the two measurements, and the 1-point bar failed 1 run of 9.
STEPS_AFTER = 150


@pytest.fixture
async def swarm() -> AsyncIterator[list[Node]]:
    a = await Node.create(peer_config(seed=0))
    nodes = [a]
    try:
        for seed in (1, 2):
            nodes.append(await Node.create(peer_config(seed=seed, join=[a.addr])))
        for n in nodes:
            await eventually(
                lambda n=n: len(n.membership.live_peers()) == 2, 30, f"{n.peer_id} to see both"
            )
        yield nodes
    finally:
        for node in reversed(nodes):
            await node.close()


async def _accuracy(nodes: list[Node]) -> float:
    """Mean test accuracy of `nodes` over EVALS evaluations, each after a few more steps."""
    accs = []
    for _ in range(EVALS):
        marks = [n.trainer.step_count + 5 for n in nodes]
        await eventually(
            lambda marks=marks: all(
                n.trainer.step_count >= m for n, m in zip(nodes, marks, strict=True)
            ),
            60,
            "a few more steps",
        )
        for n in nodes:
            accs.append((await asyncio.to_thread(n.worker.evaluate_now)).test_acc)
    return mean(accs)


async def _post(
    http: aiohttp.ClientSession, node: Node, route: str, body: bytes, client: MemberClient
) -> tuple:
    """A request by `client`, signed by its key (the model routes serve members only)."""
    return await client.post(http, node.addr, route, body)


def _poisoned(node: Node, x: np.ndarray) -> np.ndarray:
    """2 t - x, t = x with every hidden bias at -1e4: mixed at 1/2 into x it gives t."""
    params = node.trainer.model.params
    hidden = params.views["1.b"]
    start = (hidden.ctypes.data - params.data.ctypes.data) // params.data.itemsize
    t = x.astype(np.float64)
    t[start : start + hidden.size] = -1e4
    return (2 * t - x).astype(np.float32)


async def _attack(nodes: list[Node], http: aiohttp.ClientSession) -> tuple[float, float]:
    """(accuracy before, accuracy after) the poisoned push to nodes[0] by an insider holding
    nodes[1]'s key (a byzantine member: its own signature, its own id)."""
    before = await _push(nodes, http)
    rounds = [n.exchanger.rounds for n in nodes]
    steps = [n.trainer.step_count for n in nodes]
    await eventually(
        lambda: all(
            n.exchanger.rounds >= r + ROUNDS_AFTER and n.trainer.step_count >= s + STEPS_AFTER
            for n, r, s in zip(nodes, rounds, steps, strict=True)
        ),
        60,
        f"{ROUNDS_AFTER} rounds and {STEPS_AFTER} steps each after the push",
    )
    return before, await _accuracy(nodes)


async def _push(nodes: list[Node], http: aiohttp.ClientSession) -> float:
    """Warm up, measure the accuracy, then push the poisoned model to nodes[0]."""
    insider = MemberClient(key=nodes[1].key)
    await eventually(
        lambda: all(n.trainer.step_count >= WARM_STEPS for n in nodes), 120, "warm-up steps"
    )
    before = await _accuracy(nodes)
    pull = encode_control("pull", sender=nodes[1].peer_id)
    status, body = await _post(http, nodes[0], "params", pull, insider)
    assert status == 200
    _, x = decode_params(body)
    push = encode_params(_poisoned(nodes[0], np.asarray(x)), sender=nodes[1].peer_id, step=1)
    status, _ = await _post(http, nodes[0], "pushpull", bytes(push), insider)
    assert status == 200  # answered like any push: the bound decides what is mixed
    return before


async def test_a_poisoned_push_costs_the_honest_peers_at_most_a_point(swarm) -> None:
    async with aiohttp.ClientSession() as http:
        before, after = await _attack(swarm, http)
    print(f"poisoned push, bounded: accuracy {before:.2%} before, {after:.2%} after")
    ex = swarm[0].exchanger  # refused by the bound, or not mixed at all: over its sender's budget
    assert ex.guard.refused + ex.budget.over_rate + ex.budget.over_travel >= 1
    assert before - after <= 0.01, f"accuracy fell from {before:.2%} to {after:.2%}"


async def test_the_same_push_unbounded_is_mixed_in_whole(swarm, monkeypatch) -> None:
    """The exchange as it was (no bound, none of issue 22's bounds): the same push is mixed in
    as it came, at 1/2, which lands the receiver on the attacker's target (every unit dead).

    What happens next is a race this test does not judge: the receiver's own rounds average the
    dead model with two healthy ones (2/3 of the way back each round) while its pushes spread
    it; under load the healing won 1 run in ~5, and "the swarm breaks" was a flaky bar."""
    for n in swarm:  # the exchange as it was: a push mixed in as it came, judged by its distance
        guard = n.exchanger.guard  # to my model read in place (`judge`) or by my snapshot (`bound`)
        monkeypatch.setattr(guard, "judge", lambda dist, tau, sender: "mix")
        monkeypatch.setattr(guard, "bound", lambda own, theirs, tau, sender, *a: theirs)
        # ... and none of issue 22's bounds (push budget, cut, collapse guard): --push-budget off
        cfg = dataclasses.replace(n.exchanger.cfg, push_budget=False)
        n.exchanger.cfg = n.exchanger.mode_round.cfg = cfg
        n.worker.collapse = None
    params = swarm[0].trainer.model.params
    hidden = params.views["1.b"]
    lo = (hidden.ctypes.data - params.data.ctypes.data) // params.data.itemsize
    mixed: list[tuple[float, float]] = []  # (weight, lowest hidden bias) of each model mixed
    worker, mix = swarm[0].worker, swarm[0].worker.mix

    def recording_mix(other, weight, **kw):  # type: ignore[no-untyped-def]
        if not kw.get("additive"):
            mixed.append(
                (weight, float(np.asarray(other).reshape(-1)[lo : lo + hidden.size].min()))
            )
        return mix(other, weight, **kw)

    monkeypatch.setattr(worker, "mix", recording_mix)
    async with aiohttp.ClientSession() as http:
        await _push(swarm, http)
    await eventually(lambda: any(b < -1e4 for _, b in mixed), 30, "the poisoned model mixed")
    assert [w for w, b in mixed if b < -1e4] == [0.5]  # whole, at 1/2: x lands on t


async def test_a_push_from_a_non_member_is_refused(swarm) -> None:
    a = swarm[0]
    _, x = await a.store.snapshot()
    async with aiohttp.ClientSession() as http:
        stranger = MemberClient()  # a key no member table holds
        for sender in (stranger.peer_id, "", a.peer_id + "x"):
            push = encode_params(x, sender=sender, step=1)
            status, body = await _post(http, a, "pushpull", bytes(push), stranger)
            assert status == 403, body
        # a member's push, signed by its key, is served
        member = MemberClient(key=swarm[2].key)
        push = bytes(encode_params(x, sender=swarm[2].peer_id, step=1))
        status, _ = await _post(http, a, "pushpull", push, member)
        assert status == 200
