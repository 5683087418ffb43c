"""Sequential: parameters as views, seeded init, loss/grad plumbing, batched evaluation, input
checks, and that it actually learns."""

from __future__ import annotations

import numpy as np
import pytest
import swarmnode.kernels.model as km
from swarmnode.kernels.errors import ShapeError
from swarmnode.kernels.layers import GELU, Conv1d, Flatten, Linear, MaxPool1d, ReLU
from swarmnode.kernels.model import Sequential
from swarmnode.kernels.optim import make_optimizer

pytestmark = pytest.mark.timeout(60)


def mlp(seed=5, dtype=np.float32):
    return Sequential([Flatten(), Linear(8), ReLU(), Linear(3)], (2, 2), seed=seed, dtype=dtype)


def blobs(n=300, d=6, k=3, seed=0):
    rng = np.random.default_rng(seed)
    centres = rng.standard_normal((k, d)) * 3
    y = rng.integers(0, k, n)
    return (centres[y] + rng.standard_normal((n, d))).astype(np.float32), y


def test_same_seed_same_model_other_seed_other_model():
    a, b, c = mlp(5), mlp(5), mlp(6)
    np.testing.assert_array_equal(a.params.data, b.params.data)
    assert not np.array_equal(a.params.data, c.params.data)
    assert a.num_params == 2 * 2 * 8 + 8 + 8 * 3 + 3
    assert a.params.views["1.b"].tolist() == [0.0] * 8  # biases start at zero
    assert a.output_shape == (3,)


def test_layers_compute_with_views_into_the_flat_buffer():
    model = mlp()
    x = np.ones((1, 2, 2), np.float32)
    model.params.data[...] = 0
    assert not model.forward(x).any()
    model.params.views["3.b"][...] = [1, 2, 3]  # the classifier's bias, through the flat view
    np.testing.assert_array_equal(model.forward(x), [[1, 2, 3]])


def test_loss_and_grad_overwrites_grad_and_matches_full_backward():
    rng = np.random.default_rng(1)
    model = Sequential([Conv1d(3, 3), ReLU(), MaxPool1d(2), Flatten(), Linear(4)], (2, 6), seed=2)
    x, y = rng.standard_normal((5, 2, 6)).astype(np.float32), rng.integers(0, 4, 5)
    model.params.grad[...] = 123.0  # stale values must not leak into the new gradient
    loss = model.loss_and_grad(x, y)
    fast = model.params.grad.copy()
    from swarmnode.kernels.layers import softmax_cross_entropy

    loss2, d = softmax_cross_entropy(model.forward(x), y)
    dx = model.backward(d)
    assert loss == pytest.approx(loss2) and dx.shape == x.shape
    np.testing.assert_allclose(fast, model.params.grad, rtol=1e-6)
    assert 0 < loss < 10 and isinstance(loss, float)


def test_loss_is_averaged_over_the_batch():
    model = mlp(dtype=np.float64)
    rng = np.random.default_rng(2)
    x, y = rng.standard_normal((4, 2, 2)), np.array([0, 1, 2, 0])
    model.loss_and_grad(x, y)
    g_once = model.params.grad.copy()
    model.loss_and_grad(np.concatenate([x, x]), np.concatenate([y, y]))
    np.testing.assert_allclose(model.params.grad, g_once, rtol=1e-12)


def test_evaluate_in_batches_matches_one_pass_and_leaves_grad(monkeypatch):
    x, y = blobs(n=103)
    model = Sequential([Linear(16), GELU(), Linear(3)], (6,), seed=0)
    model.params.grad[...] = 7.0
    whole = model.evaluate(x, y)
    monkeypatch.setattr(km, "EVAL_BATCH", 10)
    batched = model.evaluate(x, y)
    assert batched[0] == pytest.approx(whole[0], rel=1e-5) and batched[1] == whole[1]
    assert (model.params.grad == 7.0).all()
    pred = model.predict(x)
    assert pred.shape == (103,) and pred.dtype.kind == "i"
    assert whole[1] == pytest.approx(float((pred == y).mean()))
    assert model.predict(x[:0]).shape == (0,)


def test_inputs_are_cast_to_the_parameter_dtype():
    model = mlp()
    x64 = np.random.default_rng(3).standard_normal((2, 2, 2))
    out = model.forward(x64)
    assert out.dtype == np.float32
    np.testing.assert_array_equal(out, model.forward(x64.astype(np.float32)))


@pytest.mark.parametrize(
    ("x", "y", "needle"),
    [
        (np.zeros((3, 4), np.float32), np.zeros(3, np.int64), "inputs of shape \\(N, 2, 2\\)"),
        (np.zeros((3, 2, 2), np.float32), np.zeros(2, np.int64), "labels must be 3 integers"),
        (np.zeros((3, 2, 2), np.float32), np.zeros(3, np.float32), "labels must be 3 integers"),
        (np.zeros((3, 2, 2), np.float32), np.array([0, 3, 1]), "labels must be in \\[0, 3\\)"),
        (np.zeros((3, 2, 2), np.float32), np.array([0, -1, 1]), "labels must be in \\[0, 3\\)"),
    ],
)
def test_bad_batches_are_shape_errors_and_leave_grad_alone(x, y, needle):
    model = mlp()
    model.params.grad[...] = 1.0
    with pytest.raises(ShapeError, match=needle):
        model.loss_and_grad(x, y)
    assert (model.params.grad == 1.0).all()
    with pytest.raises(ShapeError, match=needle):
        model.evaluate(x, y)


def test_mlp_learns_separable_blobs():
    x, y = blobs()
    model = Sequential([Linear(32), ReLU(), Linear(3)], (6,), seed=0)
    opt = make_optimizer("adamw", model.params, lr=0.01)
    first = model.evaluate(x, y)[0]
    for step in range(150):
        lo = (step * 32) % 268
        model.loss_and_grad(x[lo : lo + 32], y[lo : lo + 32])
        opt.step()
    loss, acc = model.evaluate(x, y)
    assert loss < first / 4 and acc > 0.95
