"""Every op's backward against central finite differences in float64 (relative error < 1e-6)."""

from __future__ import annotations

import numpy as np
import pytest

from kernels.layers import (
    GELU,
    AddChannel,
    Conv1d,
    Flatten,
    Linear,
    MaxPool1d,
    ReLU,
    Tanh,
    softmax_cross_entropy,
)
from kernels.model import Sequential

pytestmark = pytest.mark.timeout(60)
EPS = 1e-6
TOL = 1e-6


def rel_error(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.max(np.abs(a - b)) / max(np.max(np.abs(a) + np.abs(b)), 1e-12))


def numeric_grad(f, x: np.ndarray) -> np.ndarray:
    g = np.zeros_like(x)
    flat, gflat = x.reshape(-1), g.reshape(-1)
    for i in range(flat.size):
        old = flat[i]
        flat[i] = old + EPS
        up = f()
        flat[i] = old - EPS
        down = f()
        flat[i] = old
        gflat[i] = (up - down) / (2 * EPS)
    return g


def check_layers(layers, x_shape, seed=0, away_from_kinks=False):
    """Gradient of sum(w * out) w.r.t. the input and every parameter."""
    rng = np.random.default_rng(seed)
    model = Sequential(layers, x_shape[1:], seed=seed, dtype=np.float64)
    x = rng.standard_normal(x_shape)
    if away_from_kinks:  # relu / maxpool: keep FD steps from crossing a kink or a tie
        x = np.sign(x) * (np.abs(x) + 0.1) + 1e-3 * np.arange(x.size).reshape(x.shape)
    out = model.forward(x)
    w = rng.standard_normal(out.shape)

    def f():
        return float((model.forward(x) * w).sum())

    model.forward(x)
    dx = model.backward(w)
    grads = model.params.grad.copy()
    assert rel_error(dx, numeric_grad(f, x)) < TOL
    if model.params.size:
        num = numeric_grad(f, model.params.data)
        assert rel_error(grads, num) < TOL


def test_linear():
    check_layers([Linear(5)], (4, 7))


def test_relu():
    check_layers([Linear(6), ReLU()], (5, 4), away_from_kinks=True)


def test_tanh():
    check_layers([Tanh()], (3, 5))


def test_gelu():
    check_layers([GELU()], (3, 6))


def test_flatten():
    check_layers([Flatten(), Linear(3)], (2, 3, 4))


@pytest.mark.parametrize("k", [1, 3, 5])
def test_conv1d(k):
    check_layers([Conv1d(4, k)], (2, 3, 7))


def test_maxpool1d_with_remainder():
    check_layers([MaxPool1d(2)], (2, 3, 7), away_from_kinks=True)


def test_add_channel_conv_stack():
    check_layers(
        [AddChannel(), Conv1d(2, 3), Tanh(), MaxPool1d(2), Flatten(), Linear(3)],
        (2, 8),
        away_from_kinks=True,
    )


def test_softmax_cross_entropy():
    rng = np.random.default_rng(1)
    logits = rng.standard_normal((6, 5))
    y = rng.integers(0, 5, size=6)
    _, grad = softmax_cross_entropy(logits, y)
    num = numeric_grad(lambda: softmax_cross_entropy(logits, y)[0], logits)
    assert rel_error(grad, num) < TOL


def test_whole_model_loss_and_grad():
    rng = np.random.default_rng(2)
    model = Sequential([Flatten(), Linear(8), GELU(), Linear(4)], (2, 3), seed=3, dtype=np.float64)
    x, y = rng.standard_normal((5, 2, 3)), rng.integers(0, 4, size=5)
    model.loss_and_grad(x, y)
    analytic = model.params.grad.copy()
    num = numeric_grad(lambda: softmax_cross_entropy(model.forward(x), y)[0], model.params.data)
    assert rel_error(analytic, num) < TOL


def test_softmax_cross_entropy_is_stable_for_huge_logits():
    logits = np.array([[1e4, 0.0, -1e4]], dtype=np.float32)
    loss, grad = softmax_cross_entropy(logits, np.array([0]))
    assert np.isfinite(loss) and np.isfinite(grad).all()
