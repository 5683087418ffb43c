"""`swarmnode.Peer`, the Python API: started and stopped from Python (real aiohttp servers on
127.0.0.1, several peers in this process), with a user's numpy model, callbacks, and a model
that fails mid-run without harming the swarm."""

from __future__ import annotations

import asyncio
import logging
import socket

import numpy as np
import pytest
from swarmnode.gossip.membership import LEFT
from swarmnode.node.train.errors import ConfigError, UserCodeError

import swarmnode
from tests.node.train import user_models
from tests.waiting import eventually

# the example trains ~50 us a step: paced so that two peers in one process overlap
PACED = {"data": "digits", "step_time": 0.002, "eval_every": 50, "exchange": {"sync_every": 10}}


def _refused(addr: str) -> bool:
    host, port = addr.rsplit(":", 1)
    with socket.socket() as s:
        return s.connect_ex((host, int(port))) != 0


@pytest.mark.timeout(60)
async def test_start_and_stop_from_python():
    evals: list[int] = []
    async with swarmnode.Peer(
        user_models.build, steps=0, on_eval=lambda m: evals.append(m.step), **PACED
    ) as peer:
        assert peer.addr.startswith("127.0.0.1:") and peer.peer_id
        await eventually(lambda: peer.metrics.step >= 120, 30, "120 steps")
        assert peer.params().shape == (user_models.build().params.size,)
    # out of the block: stopped, left, unbound
    assert not peer.node.worker.running
    assert _refused(peer.addr)
    assert evals[:2] == [50, 100]


def _own_steps(peer: swarmnode.Peer, n: int):
    """Whether `peer` has trained `n` steps itself (a joiner inherits the swarm's counter, so
    the founder trains until stopped: both train side by side however slow the start)."""
    return lambda: peer.node.worker.steps_run >= n and peer.metrics.eval_step > 0


@pytest.mark.timeout(60)
async def test_two_peers_in_one_process_learn_together_and_callbacks_cannot_stop_them(caplog):
    rounds = []

    def broken_callback(result):
        rounds.append(result.applied)
        raise RuntimeError("a bug in the user's callback")

    caplog.set_level(logging.ERROR)
    # compressed: the user's `shapes` are what lowrank factors (the swarm knows nothing else)
    settings = {**PACED, "steps": 0, "exchange": {"sync_every": 10, "compress": "lowrank:8"}}
    async with swarmnode.Peer(user_models.build, shard=(0, 2), **settings) as a:
        async with swarmnode.Peer(
            user_models.build, shard=(1, 2), join=a, on_exchange=broken_callback, **settings
        ) as b:
            await eventually(_own_steps(b, 400), 40, "b to train 400 steps of its own")
            ex = b.node.exchanger
            # on a loaded box a round can take as long as many steps (seen: 1 round in 400)
            await eventually(
                lambda: len(rounds) >= 5 and sum(rounds) + ex.served >= 5, 40, "5 rounds mixed"
            )
            whole = 4 * b.params().size  # bytes of one uncompressed model
            # each payload (its requests and its answers to a) far below a whole model
            assert ex.bytes_sent < (ex.rounds + ex.served) * whole / 3, (ex.bytes_sent, whole)
    accs = [a.metrics.test_acc, b.metrics.test_acc]
    assert min(accs) >= 0.90, accs
    # each of b's own rounds reached its callback, despite the error; and the two mixed, in
    # b's rounds or a's (two peers' rounds often collide: then one of them is served)
    assert len(rounds) >= 5 and sum(rounds) + ex.served >= 5, (rounds, ex.served)
    logged = [r.getMessage() for r in caplog.records if "callback on_exchange" in r.getMessage()]
    assert len(logged) == 1 and "test_peer_api.py" in logged[0]  # once, with its place


@pytest.mark.timeout(60)
async def test_a_model_that_raises_mid_run_fails_its_peer_alone(monkeypatch):
    """b's model raises at its 60th call: b's wait() raises the user's error, b stops serving
    its model and leaves; a never mixes anything from it after that and goes on learning."""
    monkeypatch.setenv("USER_MODEL_FAIL_AT", "60")
    settings = {**PACED, "steps": 0, "exchange": {"sync_every": 10, "mode": "robust"}}
    async with swarmnode.Peer(user_models.build, **settings) as a:
        async with swarmnode.Peer(user_models.raises_later, join=a, **settings) as b:
            with pytest.raises(UserCodeError, match=r"user_models\.py:\d+ in loss_and_grad"):
                await asyncio.wait_for(b.wait(), 30)
            assert b.node.exchanger.refusing is not None  # its model is no one's any more
            await eventually(
                lambda: a.node.membership.get(b.peer_id).state == LEFT, 10, "b marked left"
            )
            after = a.node.worker.steps_run
            await eventually(_own_steps(a, after + 150), 30, "a to go on training")
            assert np.isfinite(a.params()).all()
    assert a.metrics.test_acc >= 0.90


def test_run_blocks_until_the_budget_is_spent():
    metrics = swarmnode.Peer("mlp:16", steps=60, eval_every=30).run()
    assert metrics.step == 60 and 0 <= metrics.test_acc <= 1


def test_an_unknown_setting_is_refused_by_name():
    with pytest.raises(ConfigError, match=r"unknown peer setting.*stepz"):
        swarmnode.Peer("mlp:16", stepz=5)
    with pytest.raises(ConfigError, match=r"exchange settings: .*'sync_evry'"):
        swarmnode.Peer("mlp:16", exchange={"sync_evry": 5})
