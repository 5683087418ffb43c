"""Optimizers against textbook formulas, state round trips and validation (numpy path)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from swarmnode.kernels.errors import ShapeError, SwarmnodeError
from swarmnode.kernels.flat import FlatParams
from swarmnode.kernels.optim import AdamW, OptimizerError, make_optimizer, sgd_reference

pytestmark = pytest.mark.timeout(30)


def textbook_sgd(x, grads, lr, mu, wd):
    """PyTorch's SGD: g += wd x; v = mu v + g; x -= lr v."""
    x, v = x.copy(), np.zeros_like(x)
    for g in grads:
        v = mu * v + (g + wd * x)
        x = x - lr * v
    return x, v


def textbook_adamw(x, grads, lr, b1, b2, eps, wd):
    """Algorithm 2 of Loshchilov & Hutter (as PyTorch's AdamW): decay first, then Adam."""
    x, m, v = x.copy(), np.zeros_like(x), np.zeros_like(x)
    for t, g in enumerate(grads, start=1):
        x = x * (1 - lr * wd)
        m = b1 * m + (1 - b1) * g
        v = b2 * v + (1 - b2) * g * g
        mhat, vhat = m / (1 - b1**t), v / (1 - b2**t)
        x = x - lr * mhat / (np.sqrt(vhat) + eps)
    return x, m, v


def run(name, x0, grads, dtype=np.float64, **kw):
    p = FlatParams([("a", (3,)), ("b", (x0.size - 3,))], dtype=dtype)
    p.data[...] = x0
    opt = make_optimizer(name, p, **kw)
    data_buf = p.data
    for g in grads:
        p.grad[...] = g
        opt.step()
    assert p.data is data_buf  # updated in place: the layers' views still see the new values
    return p, opt


@pytest.fixture
def problem():
    rng = np.random.default_rng(0)
    return rng.standard_normal(10), [rng.standard_normal(10) for _ in range(6)]


@pytest.mark.parametrize("wd", [0.0, 0.05])
def test_sgd_matches_the_textbook(problem, wd):
    x0, grads = problem
    p, opt = run("sgd", x0, grads, lr=0.1, momentum=0.9, weight_decay=wd)
    want_x, want_v = textbook_sgd(x0, grads, 0.1, 0.9, wd)
    np.testing.assert_allclose(p.data, want_x, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(opt.velocity, want_v, rtol=1e-12, atol=1e-12)
    assert opt.t == len(grads)


@pytest.mark.parametrize("wd", [0.0, 0.1])
def test_adamw_matches_the_textbook(problem, wd):
    x0, grads = problem
    p, opt = run("adamw", x0, grads, lr=0.01, betas=(0.8, 0.99), eps=1e-6, weight_decay=wd)
    want_x, want_m, want_v = textbook_adamw(x0, grads, 0.01, 0.8, 0.99, 1e-6, wd)
    np.testing.assert_allclose(p.data, want_x, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(opt.m, want_m, rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(opt.v, want_v, rtol=1e-12, atol=1e-15)


def test_float32_steps_stay_float32_and_close_to_float64(problem):
    x0, grads = problem
    p32, _ = run("adamw", x0, grads, dtype=np.float32, lr=0.01)
    p64, _ = run("adamw", x0, grads, dtype=np.float64, lr=0.01)
    assert p32.data.dtype == np.float32
    np.testing.assert_allclose(p32.data, p64.data, rtol=1e-5, atol=1e-6)


def test_adamw_first_step_moves_by_lr_times_sign():
    p = FlatParams([("w", (4,))])
    opt = AdamW(p, lr=0.01, weight_decay=0.0)
    p.grad[...] = [3.0, -2.0, 0.5, -0.1]
    opt.step()
    np.testing.assert_allclose(p.data, -0.01 * np.sign(p.grad), rtol=1e-4)


def test_weight_decay_is_decoupled_in_adamw():
    """With zero gradient, AdamW shrinks x by exactly (1 - lr wd) per step; Adam's state stays 0."""
    p = FlatParams([("w", (3,))], dtype=np.float64)
    p.data[...] = [1.0, -2.0, 4.0]
    opt = make_optimizer("adamw", p, lr=0.1, weight_decay=0.5)
    for _ in range(3):
        opt.step()
    np.testing.assert_allclose(p.data, np.array([1.0, -2.0, 4.0]) * 0.95**3, rtol=1e-12)
    assert not opt.m.any() and not opt.v.any()


def test_sgd_reference_is_in_place_without_scratch():
    x, g, v = np.ones(3, np.float32), np.ones(3, np.float32), np.zeros(3, np.float32)
    before = x
    sgd_reference(x, g, v, 0.5, 0.9, 0.1)
    assert before is x
    np.testing.assert_allclose(v, 1.1)
    np.testing.assert_allclose(x, 1 - 0.55)


# --- state_dict / load_state_dict ---------------------------------------------------------


@pytest.mark.parametrize("name", ["sgd", "adamw"])
def test_state_round_trip_continues_identically(problem, name):
    x0, grads = problem
    kw = {"lr": 0.01, "weight_decay": 0.01}
    a, opt_a = run(name, x0, grads[:3], **kw)
    state = opt_a.state_dict()
    assert all(isinstance(v, (np.ndarray, int, float, str)) for v in state.values())
    assert state["name"] == name and state["t"] == 3 and state["lr"] == 0.01
    arrays = [v for v in state.values() if isinstance(v, np.ndarray)]
    assert arrays and all(not np.shares_memory(v, a.data) for v in arrays)  # copies

    b = FlatParams([("a", (3,)), ("b", (7,))], dtype=np.float64)
    b.data[...] = a.data
    opt_b = make_optimizer(name, b, **kw)
    opt_b.load_state_dict(state)
    for g in grads[3:]:
        for p, opt in ((a, opt_a), (b, opt_b)):
            p.grad[...] = g
            opt.step()
    np.testing.assert_array_equal(a.data, b.data)


def _state(**over):
    p = FlatParams([("w", (5,))])
    opt = make_optimizer("adamw", p, lr=0.01)
    p.grad[...] = 1.0
    opt.step()
    return {**opt.state_dict(), **over}


@pytest.mark.parametrize(
    ("state", "error", "needle"),
    [
        (_state(name="sgd"), OptimizerError, "for 'sgd'"),
        (_state(v=np.zeros(6, np.float32)), ShapeError, "expected \\(5,\\)"),
        (_state(v=np.full(5, np.nan, np.float32)), OptimizerError, "finite"),
        (_state(v=np.array(["a"] * 5)), OptimizerError, "finite floats"),
        (_state(t=-1), OptimizerError, "'t'"),
        (_state(t=1.5), OptimizerError, "'t'"),
        ({k: v for k, v in _state().items() if k != "m"}, OptimizerError, "lacks 'm'"),
        ([1, 2], OptimizerError, "must be a dict"),
    ],
)
def test_bad_state_is_refused_and_changes_nothing(state, error, needle):
    p = FlatParams([("w", (5,))])
    opt = make_optimizer("adamw", p, lr=0.01)
    p.grad[...] = -2.0
    opt.step()
    before = opt.state_dict()
    with pytest.raises(error, match=needle):
        opt.load_state_dict(state)
    after = opt.state_dict()
    assert after["t"] == before["t"]
    np.testing.assert_array_equal(after["m"], before["m"])
    np.testing.assert_array_equal(after["v"], before["v"])


# --- construction and the learning rate ---------------------------------------------------


def test_lr_is_settable_and_validated():
    p = FlatParams([("w", (2,))])
    opt = make_optimizer("sgd", p, lr=0.1, momentum=0.0)
    opt.lr = 0.5
    p.grad[...] = 1.0
    opt.step()
    np.testing.assert_allclose(p.data, -0.5)
    for bad in (0.0, -1.0, math.nan, math.inf, "0.1", None):
        with pytest.raises(OptimizerError, match="learning rate"):
            opt.lr = bad
    assert opt.lr == 0.5


@pytest.mark.parametrize(
    ("name", "kw", "needle"),
    [
        ("rmsprop", {}, "unknown optimizer 'rmsprop' \\(expected sgd, adamw\\)"),
        ("sgd", {"lr": 0.0}, "learning rate"),
        ("sgd", {"momentum": 1.0}, "momentum"),
        ("sgd", {"weight_decay": -0.1}, "weight_decay"),
        ("sgd", {"betas": (0.9, 0.99)}, "unexpected keyword"),
        ("adamw", {"betas": (0.9, 1.0)}, "betas"),
        ("adamw", {"betas": 0.9}, "two numbers"),
        ("adamw", {"eps": 0.0}, "eps"),
        ("adamw", {"momentum": 0.9}, "unexpected keyword"),
    ],
)
def test_bad_construction_is_an_optimizer_error(name, kw, needle):
    kw = {"lr": 0.1, **kw}
    with pytest.raises(OptimizerError, match=needle) as info:
        make_optimizer(name, FlatParams([("w", (2,))]), **kw)
    assert isinstance(info.value, SwarmnodeError) and "\n" not in str(info.value)


def test_names_are_case_insensitive():
    assert make_optimizer("AdamW", FlatParams([("w", (2,))]), lr=0.1).name == "adamw"


@pytest.mark.parametrize("name", ["sgd", "adamw"])
def test_forget_heading_drops_the_momentum_and_keeps_the_scale(problem, name):
    # what the collapse guard calls after a rollback (node/train/worker.py): the next step goes
    # where its own gradient points, at the size the optimizer had learnt
    x0, grads = problem
    p, opt = run(name, x0, grads[:4], lr=0.01, weight_decay=0.0)
    scale = None if name == "sgd" else opt.v.copy()
    opt.forget_heading()
    heading = opt.velocity if name == "sgd" else opt.m
    assert not np.any(heading)
    if scale is not None:
        np.testing.assert_array_equal(opt.v, scale)
    before = p.data.copy()
    p.grad[...] = grads[4]
    opt.step()
    assert np.all(np.sign(before - p.data) == np.sign(grads[4]))  # along its gradient alone
