"""`--lr-scale linear` follows membership: three real peers (`Node`s, aiohttp on 127.0.0.1)
train at 3x their lr, and the two that stay drop to 2x as soon as the third leaves."""

from __future__ import annotations

import logging

import pytest
from swarmnode.node.peer.node import Node

from tests.integration.inprocess import peer_config
from tests.waiting import eventually

pytestmark = pytest.mark.timeout(90)

LR = 0.05


def _lr_of(node: Node) -> float:
    return node.trainer.optimizer.lr


async def test_the_scaled_lr_rises_with_joins_and_falls_at_once_when_a_peer_leaves() -> None:
    scaled = {"lr": LR, "lr_scale": "linear", "lr_warmup": 0}
    a = await Node.create(peer_config(seed=0, **scaled))
    nodes = [a]
    try:
        # alone: exactly the base lr
        await eventually(lambda: a.trainer.step_count > 20, 30, "a first steps")
        assert _lr_of(a) == LR
        for seed in (1, 2):
            nodes.append(await Node.create(peer_config(seed=seed, join=[a.addr], **scaled)))
        for n in nodes:
            await eventually(
                lambda n=n: _lr_of(n) == pytest.approx(3 * LR), 30, f"{n.peer_id} at 3x"
            )
        await nodes.pop().close()  # announces `left`: the others know at once
        for n in nodes:
            await eventually(
                lambda n=n: _lr_of(n) == pytest.approx(2 * LR), 30, f"{n.peer_id} back to 2x"
            )
    finally:
        for node in reversed(nodes):
            await node.close()


@pytest.mark.parametrize(("steps", "rule"), [(10_000, "sqrt"), (0, "none")])
async def test_the_default_scale_rule_follows_the_schedule(steps: int, rule: str) -> None:
    # `--lr-scale auto`: sqrt under the cosine that 10,000 steps give, none at a constant lr
    node = await Node.create(peer_config(seed=0, steps=steps))
    try:
        assert node.worker.lr_scale.rule == rule
    finally:
        await node.close()


async def test_a_joiner_whose_lr_will_not_follow_the_swarms_decay_is_told_which_flag_does(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # the swarm decays to step 10,000 (cosine); a joiner started with --steps 0 keeps a constant
    # lr, and one with the swarm's --steps says nothing
    a = await Node.create(peer_config(seed=0, steps=10_000))
    nodes = [a]
    try:
        with caplog.at_level(logging.WARNING, logger="swarmnode.node.peer.node"):
            nodes.append(await Node.create(peer_config(seed=1, join=[a.addr], steps=0)))
        said = [r.getMessage() for r in caplog.records if "lr" in r.getMessage()]
        assert said == [
            "the swarm decays its lr (cosine to step 10000), this peer's is constant: its lr "
            "will not follow the swarm's; give --lr-decay-steps 10000 (or --steps 10000) to "
            "follow it"
        ]
        caplog.clear()
        with caplog.at_level(logging.WARNING, logger="swarmnode.node.peer.node"):
            nodes.append(await Node.create(peer_config(seed=2, join=[a.addr], steps=10_000)))
        # b's constant record disagrees with a's: no one schedule, no advice; a's alone would
        # have matched
        assert not [r for r in caplog.records if "lr" in r.getMessage()]
    finally:
        for node in reversed(nodes):
            await node.close()
