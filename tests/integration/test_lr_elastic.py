"""`--lr-scale linear` follows membership: three real peers (`Node`s, aiohttp on 127.0.0.1)
train at 3x their lr, and the two that stay drop to 2x as soon as the third leaves."""

from __future__ import annotations

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
