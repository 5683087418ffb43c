"""Flat parameters, model plumbing, optimizers against closed forms, backend selection."""

from __future__ import annotations

import numpy as np
import pytest

from kernels.backend import select_backend, to_numpy
from kernels.errors import BackendError, ShapeError
from kernels.flat import FlatParams
from kernels.layers import Flatten, Linear, ReLU
from kernels.model import Sequential
from kernels.optim import AdamW, OptimizerError, make_optimizer, sgd_reference

pytestmark = pytest.mark.timeout(30)


def test_views_share_memory_with_the_flat_vector():
    p = FlatParams([("W", (3, 4)), ("b", (4,))])
    assert p.size == 16 and p.data.dtype == np.float32
    p.views["W"][...] = 1.0
    p.grads["b"][...] = 2.0
    assert p.data[:12].sum() == 12 and p.grad[12:].sum() == 8
    p.load(np.arange(16, dtype=np.float32))
    assert p.views["b"][0] == 12
    with pytest.raises(ShapeError):
        p.load(np.zeros(3, np.float32))


def test_same_seed_same_model_and_layers_are_views():
    a = Sequential([Flatten(), Linear(8), ReLU(), Linear(3)], (2, 2), seed=5)
    b = Sequential([Flatten(), Linear(8), ReLU(), Linear(3)], (2, 2), seed=5)
    np.testing.assert_array_equal(a.params.data, b.params.data)
    a.params.data[...] = 0
    assert float(np.abs(a.forward(np.ones((1, 2, 2), np.float32))).sum()) == 0.0


def test_sgd_matches_closed_form():
    p = FlatParams([("w", (3,))])
    p.data[...] = [1, 2, 3]
    opt = make_optimizer("sgd", p, lr=0.1, momentum=0.5, weight_decay=0.1)
    p.grad[...] = [1, 1, 1]
    opt.step()
    v1 = np.array([1, 1, 1]) + 0.1 * np.array([1, 2, 3])
    np.testing.assert_allclose(p.data, np.array([1, 2, 3]) - 0.1 * v1, rtol=1e-6)
    opt.step()
    x1 = np.array([1, 2, 3]) - 0.1 * v1
    v2 = 0.5 * v1 + 1 + 0.1 * x1
    np.testing.assert_allclose(p.data, x1 - 0.1 * v2, rtol=1e-6)


def test_adamw_first_step_moves_by_lr_times_sign():
    p = FlatParams([("w", (4,))])
    opt = AdamW(p, lr=0.01, weight_decay=0.0)
    p.grad[...] = [3.0, -2.0, 0.5, -0.1]
    opt.step()
    np.testing.assert_allclose(p.data, -0.01 * np.sign(p.grad), rtol=1e-4)


def test_optimizer_state_round_trip_and_validation():
    p = FlatParams([("w", (5,))])
    opt = make_optimizer("adamw", p, lr=0.01)
    p.grad[...] = 1.0
    opt.step()
    state = opt.state_dict()
    fresh = make_optimizer("adamw", FlatParams([("w", (5,))]), lr=0.01)
    fresh.load_state_dict(state)
    np.testing.assert_array_equal(fresh.m, opt.m)
    assert fresh.t == 1
    with pytest.raises(OptimizerError, match="sgd"):
        make_optimizer("sgd", p, lr=0.1).load_state_dict(state)
    with pytest.raises(ShapeError):
        make_optimizer("adamw", FlatParams([("w", (6,))]), lr=0.01).load_state_dict(state)
    with pytest.raises(OptimizerError, match="unknown optimizer"):
        make_optimizer("rmsprop", p, lr=0.1)


def test_sgd_reference_is_in_place():
    x, g, v = np.ones(3, np.float32), np.ones(3, np.float32), np.zeros(3, np.float32)
    ident = id(x)
    sgd_reference(x, g, v, 0.5, 0.9, 0.0)
    assert id(x) == ident and np.allclose(x, 0.5)


def test_backend_selection_on_a_machine_without_cuda(monkeypatch):
    import kernels.backend as kb

    monkeypatch.setattr(kb, "cuda_device_count", lambda: 0)
    assert select_backend("cpu").name == "numpy"
    assert select_backend("auto").name == "numpy"
    with pytest.raises(BackendError, match="cuda") as info:
        select_backend("cuda")
    assert "\n" not in str(info.value)
    with pytest.raises(BackendError, match="expected auto, cpu, cuda"):
        select_backend("tpu")
    assert isinstance(to_numpy(np.ones(2)), np.ndarray)
