"""The swarm handle's binding of a user's model to one flat float32 buffer (node/swarm/binding.py):
the same memory as the model's, the views the loop writes through, and one clear error for a
model that no longer views the buffer (the torch path's check is this one, torch-free here)."""

from __future__ import annotations

import numpy as np
import pytest
from swarmnode.node.swarm.binding import Binding, Slot, bind_arrays, bind_vector
from swarmnode.node.swarm.errors import DeviceMismatchError, ModelChangedError
from swarmnode.node.swarm.handle import bind
from swarmnode.node.train.errors import ConfigError

pytestmark = pytest.mark.timeout(30)


def _mlp() -> dict[str, np.ndarray]:
    rng = np.random.default_rng(0)
    return {
        "W1": rng.standard_normal((4, 3)).astype(np.float32),
        "b1": np.zeros(3, np.float32),
        "W2": rng.standard_normal((3, 2)).astype(np.float32),
    }


def test_a_flat_vector_is_used_as_it_is_no_copy():
    x = np.arange(6, dtype=np.float32)
    b = bind_vector(x)
    assert np.shares_memory(b.vector, x) and b.size == 6 and b.device == "cpu"
    x[2] = 100.0  # the loop updates its vector: the swarm's buffer is that vector
    assert b.vector[2] == 100.0
    b.check()  # nothing to compare for a bare vector


def test_a_2d_contiguous_array_is_viewed_flat():
    x = np.zeros((3, 4), np.float32)
    b = bind_vector(x)
    assert b.vector.shape == (12,) and np.shares_memory(b.vector, x)


@pytest.mark.parametrize(
    ("bad", "says"),
    [
        (np.zeros(4, np.float64), "float32"),
        (np.zeros((4, 4), np.float32)[:, 1], "contiguous"),
        ("not a model", "torch nn.Module"),
    ],
)
def test_what_is_not_a_float32_buffer_is_refused_with_what_to_do(bad, says):
    with pytest.raises(ConfigError, match=says):
        bind(bad)


def test_a_dict_of_arrays_becomes_views_into_one_buffer_with_the_same_values():
    params = _mlp()
    before = {k: v.copy() for k, v in params.items()}
    b = bind(params)
    assert b.size == 12 + 3 + 6
    for name, value in params.items():
        assert np.shares_memory(value, b.vector)
        np.testing.assert_array_equal(value, before[name])
    assert list(b.params.views) == ["W1", "b1", "W2"]
    assert [v.shape for v in b.params.views.values()] == [(4, 3), (3,), (3, 2)]
    params["b1"] -= 1.0  # the loop's in-place update lands in the swarm's buffer
    np.testing.assert_array_equal(b.vector[12:15], -1.0)
    b.check()


def test_a_parameter_rebound_by_the_loop_is_named():
    params = _mlp()
    b = bind(params)
    params["W2"] = params["W2"] - 0.1  # not in place: a new array the swarm never sees
    with pytest.raises(ModelChangedError, match=r"'W2' no longer views.*in place"):
        b.check()


def test_a_layer_added_after_the_binding_is_named():
    params = _mlp()
    b = bind(params)
    params["b2"] = np.zeros(2, np.float32)
    with pytest.raises(ModelChangedError, match=r"3 tensors of 21 values.*4 of 23.*new: b2"):
        b.check()


def test_a_parameter_moved_to_another_device_is_named_before_its_address():
    # the torch binding's check: its slots come from the module; here from a stand-in
    slots = [Slot("fc.weight", 1000, 6, "cpu"), Slot("fc.bias", 1024, 2, "cpu")]
    now = list(slots)
    b = Binding(np.zeros(8, np.float32), {"fc.weight": (2, 3), "fc.bias": (2,)}, kind="t",
                expected=slots, current=lambda: now)  # fmt: skip
    b.check()
    now[1] = Slot("fc.bias", 5000, 2, "cuda:0")  # model.to("cuda"): new memory, new device
    with pytest.raises(DeviceMismatchError, match=r"'fc.bias' is on cuda:0.*built for cpu"):
        b.check()


def test_arrays_of_another_dtype_are_refused_before_anything_is_rebound():
    params = _mlp()
    params["b1"] = params["b1"].astype(np.float64)
    kept = dict(params)
    with pytest.raises(ConfigError, match=r"params\['b1'\] is float64"):
        bind_arrays(params)
    assert all(params[k] is kept[k] for k in params)
