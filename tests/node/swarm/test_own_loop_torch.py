"""The torch path of `swarmnode.Swarm` (skipped where torch is not installed): a module's
parameters become views into the swarm's buffer, the user's AdamW trains that buffer, a
parameter moved or replaced afterwards is named, and the torch example learns alone and
through a Swarm of its own (the swarm's learning is the numpy path's: tests/integration)."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from swarmnode.node.swarm.errors import ModelChangedError  # noqa: E402
from swarmnode.node.swarm.handle import bind  # noqa: E402

pytestmark = pytest.mark.timeout(90)
sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "examples"))


def _net() -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.ReLU(), torch.nn.Linear(3, 2))


def test_the_parameters_view_one_flat_buffer_and_the_users_optimizer_trains_it():
    net = _net()
    before = [p.detach().clone() for p in net.parameters()]
    b = bind(net)
    assert b.size == 4 * 3 + 3 + 3 * 2 + 2 and b.device == "cpu"
    for p, was in zip(net.parameters(), before, strict=True):
        torch.testing.assert_close(p.detach(), was)  # the same values, now in the buffer
        assert np.shares_memory(p.detach().numpy(), b.vector)
    opt = torch.optim.AdamW(net.parameters(), lr=0.1)
    snapshot = b.vector.copy()
    net(torch.ones(5, 4)).sum().backward()
    opt.step()
    assert not np.array_equal(b.vector, snapshot)  # the optimizer wrote the swarm's buffer
    b.check()


def test_a_replaced_layer_is_named():
    net = _net()
    b = bind(net)
    net[2] = torch.nn.Linear(3, 2)
    with pytest.raises(ModelChangedError, match=r"'2\.weight' no longer views"):
        b.check()


def test_the_torch_example_learns_alone_and_as_a_founder_of_its_own_swarm():
    import own_loop_torch

    common = ["--steps", "300", "--eval-every", "50", "--shard", "0/2"]
    assert own_loop_torch.main([*common, "--no-swarm"])[-1]["test_acc"] > 0.85
    assert own_loop_torch.main(common)[-1]["test_acc"] > 0.85  # a Swarm of one: no rounds
