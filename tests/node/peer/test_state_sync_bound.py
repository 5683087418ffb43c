"""A joiner's push bound starts from its donors: their distances to the model it loaded are its
first distances, so that before its first round a member serving -x (2 |own| away) is refused,
not admitted by the fresh bound's 4 x |own|."""

from __future__ import annotations

import numpy as np
import pytest
from swarmnode.gossip.robust import PushGuard
from swarmnode.node.peer.state_sync import sync_from_swarm

from tests.node.peer.test_state_sync import FakeExchanger, FakeMembership, FakeNode

pytestmark = pytest.mark.timeout(30)


def donors(*offsets: float) -> dict[str, np.ndarray]:
    base = np.linspace(1.0, 2.0, 64).astype(np.float32)
    return {pid: base + np.float32(o) for pid, o in zip("abc", offsets, strict=False)}


async def test_the_donors_distances_to_the_loaded_model_seed_the_push_bound() -> None:
    exchanger = FakeExchanger([donors(-0.01, 0.0, 0.01)])
    exchanger.guard = PushGuard(anchored=True)
    node = FakeNode(FakeMembership(["a", "b", "c"]), exchanger)
    await sync_from_swarm(node, timeout=5)
    (own,) = node.store.loaded
    tau = exchanger.guard.radius()
    assert tau is not None and tau < 0.1 * float(np.linalg.norm(own))  # the donors' scale
    verdict = exchanger.guard.judge(float(np.linalg.norm(2 * own)), tau, "liar")  # -x is 2|x| off
    assert verdict == "refuse"


async def test_identical_donors_leave_the_bound_as_it_was() -> None:
    exchanger = FakeExchanger([donors(0.0, 0.0, 0.0)])
    exchanger.guard = PushGuard(anchored=True)
    node = FakeNode(FakeMembership(["a", "b", "c"]), exchanger)
    await sync_from_swarm(node, timeout=5)
    assert exchanger.guard.radius() is None  # no distance: the first push still gets 4 x |own|
