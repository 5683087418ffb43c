"""Every op against a reference: forward against a plain loop / formula, backward against central
finite differences in float64 (relative error < 1e-6), for inputs AND parameters."""

from __future__ import annotations

import math

import numpy as np
import pytest
from swarmnode.kernels.errors import ShapeError
from swarmnode.kernels.layers import (
    GELU,
    AddChannel,
    Conv1d,
    Conv2d,
    Flatten,
    Linear,
    MaxPool1d,
    MaxPool2d,
    ReLU,
    Reshape,
    Tanh,
    im2col,
    softmax_cross_entropy,
)
from swarmnode.kernels.model import Sequential

pytestmark = pytest.mark.timeout(60)
EPS = 1e-6
TOL = 1e-6


def rel_error(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.max(np.abs(a - b)) / max(np.max(np.abs(a) + np.abs(b)), 1e-12))


def numeric_grad(f, x: np.ndarray) -> np.ndarray:
    """Central differences of the scalar f() w.r.t. every entry of x (perturbed in place)."""
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


def away_from_kinks(x: np.ndarray) -> np.ndarray:
    """relu / maxpool: keep every FD step from crossing a kink or flipping a tie."""
    return np.sign(x) * (np.abs(x) + 0.1) + 1e-3 * np.arange(x.size).reshape(x.shape)


def check_layers(layers, x_shape, seed=0, kinks=False):
    """Gradient of sum(w * out) w.r.t. the input and every parameter, against FD."""
    rng = np.random.default_rng(seed)
    model = Sequential(layers, x_shape[1:], seed=seed, dtype=np.float64)
    model.params.data[...] += 0.1 * rng.standard_normal(model.params.size)  # non-zero biases
    x = rng.standard_normal(x_shape)
    if kinks:
        x = away_from_kinks(x)
    w = rng.standard_normal(model.forward(x).shape)

    def f():
        return float((model.forward(x) * w).sum())

    model.forward(x)
    dx = model.backward(w)
    grads = model.params.grad.copy()
    assert dx.shape == x.shape
    assert rel_error(dx, numeric_grad(f, x)) < TOL
    if model.params.size:
        assert np.abs(grads).max() > 0  # a gradient that stayed zero would pass FD trivially
        assert rel_error(grads, numeric_grad(f, model.params.data)) < TOL


# --- backward against finite differences ---------------------------------------------------


def test_linear():
    check_layers([Linear(5)], (4, 7))


def test_relu():
    check_layers([Linear(6), ReLU()], (5, 4), kinks=True)


def test_tanh():
    check_layers([Tanh()], (3, 5))


def test_gelu():
    check_layers([GELU()], (3, 6))


def test_flatten():
    check_layers([Flatten(), Linear(3)], (2, 3, 4))


@pytest.mark.parametrize("k", [1, 3, 5])
def test_conv1d(k):
    check_layers([Conv1d(4, k)], (2, 3, 7))


def test_conv1d_kernel_longer_than_signal():
    check_layers([Conv1d(2, 7)], (2, 2, 3))


@pytest.mark.parametrize("length", [6, 7])
def test_maxpool1d_with_and_without_remainder(length):
    check_layers([MaxPool1d(2)], (2, 3, length), kinks=True)


def test_add_channel_conv_stack():
    check_layers(
        [AddChannel(), Conv1d(2, 3), Tanh(), MaxPool1d(2), Flatten(), Linear(3)],
        (2, 8),
        kinks=True,
    )


@pytest.mark.parametrize("k", [1, 3, 5])
@pytest.mark.parametrize("c", [1, 3])
def test_conv2d(k, c):
    check_layers([Conv2d(4, k)], (2, 5, 6, c))


def test_conv2d_kernel_larger_than_image():
    check_layers([Conv2d(2, 5)], (2, 3, 2, 2))


@pytest.mark.parametrize(("size", "h", "w"), [(2, 6, 6), (2, 7, 5), (3, 7, 8), (1, 3, 4)])
def test_maxpool2d_with_and_without_remainder(size, h, w):
    check_layers([MaxPool2d(size)], (2, h, w, 3), kinks=True)


def test_reshape_conv2d_stack():
    """Flat features -> image -> conv -> pool -> dense, as a `cnn2d:` spec builds it."""
    check_layers(
        [
            Reshape((6, 6, 1)),
            Conv2d(3, 3),
            Tanh(),
            MaxPool2d(2),
            Conv2d(2, 3),
            Flatten(),
            Linear(3),
        ],
        (2, 36),
        kinks=True,
    )


def test_softmax_cross_entropy():
    rng = np.random.default_rng(1)
    logits = rng.standard_normal((6, 5)) * 3
    y = rng.integers(0, 5, size=6)
    _, grad = softmax_cross_entropy(logits, y)
    num = numeric_grad(lambda: softmax_cross_entropy(logits, y)[0], logits)
    assert rel_error(grad, num) < TOL


@pytest.mark.parametrize("act", [ReLU, GELU, Tanh])
def test_whole_model_loss_and_grad(act):
    """loss_and_grad (which skips the unused input gradient) against FD of the mean loss."""
    rng = np.random.default_rng(2)
    model = Sequential([Flatten(), Linear(8), act(), Linear(4)], (2, 3), seed=3, dtype=np.float64)
    x, y = away_from_kinks(rng.standard_normal((5, 2, 3))), rng.integers(0, 4, size=5)
    model.loss_and_grad(x, y)
    analytic = model.params.grad.copy()
    num = numeric_grad(lambda: softmax_cross_entropy(model.forward(x), y)[0], model.params.data)
    assert rel_error(analytic, num) < TOL


def test_conv_model_loss_and_grad():
    rng = np.random.default_rng(4)
    layers = [Conv1d(3, 3), ReLU(), MaxPool1d(2), Flatten(), Linear(4)]
    model = Sequential(layers, (2, 6), seed=1, dtype=np.float64)
    x, y = away_from_kinks(rng.standard_normal((3, 2, 6))), rng.integers(0, 4, size=3)
    model.loss_and_grad(x, y)
    analytic = model.params.grad.copy()
    num = numeric_grad(lambda: softmax_cross_entropy(model.forward(x), y)[0], model.params.data)
    assert rel_error(analytic, num) < TOL


def test_conv2d_model_loss_and_grad():
    rng = np.random.default_rng(7)
    layers = [Conv2d(3, 3), ReLU(), MaxPool2d(2), Conv2d(4, 3), ReLU(), Flatten(), Linear(4)]
    model = Sequential(layers, (6, 5, 2), seed=1, dtype=np.float64)
    x, y = away_from_kinks(rng.standard_normal((3, 6, 5, 2))), rng.integers(0, 4, size=3)
    model.loss_and_grad(x, y)
    analytic = model.params.grad.copy()
    num = numeric_grad(lambda: softmax_cross_entropy(model.forward(x), y)[0], model.params.data)
    assert rel_error(analytic, num) < TOL


# --- forward against plain references --------------------------------------------------------


def test_conv1d_forward_matches_a_direct_loop():
    rng = np.random.default_rng(5)
    n, c, length, out, k = 2, 3, 9, 4, 5
    model = Sequential([Conv1d(out, k)], (c, length), seed=0, dtype=np.float64)
    model.params.views["0.b"][...] = rng.standard_normal(out)
    x = rng.standard_normal((n, c, length))
    W = model.params.views["0.W"].reshape(out, c, k)  # layout: W[o, c * k + j]
    b = model.params.views["0.b"]
    pad = k // 2
    xpad = np.pad(x, ((0, 0), (0, 0), (pad, pad)))
    want = np.zeros((n, out, length))
    for s in range(n):
        for o in range(out):
            for pos in range(length):
                want[s, o, pos] = b[o] + (W[o] * xpad[s, :, pos : pos + k]).sum()
    np.testing.assert_allclose(model.forward(x), want, rtol=1e-12, atol=1e-12)


def conv2d_loop(x, W, b, k):
    """The definition: out[n, y, x, o] = b[o] + sum over the k x k patch (zero padded)."""
    n, h, w, c = x.shape
    pad = k // 2
    xpad = np.pad(x, ((0, 0), (pad, pad), (pad, pad), (0, 0)))
    Wt = W.reshape(k, k, c, -1)  # layout: W[(i * k + j) * c + ch, o]
    out = np.zeros((n, h, w, Wt.shape[3]))
    for s in range(n):
        for r in range(h):
            for q in range(w):
                patch = xpad[s, r : r + k, q : q + k, :]
                out[s, r, q] = b + np.einsum("ijc,ijco->o", patch, Wt)
    return out


@pytest.mark.parametrize(
    ("k", "shape"),
    [(1, (2, 4, 5, 3)), (3, (2, 5, 4, 3)), (3, (2, 5, 4, 1)), (5, (1, 3, 6, 2)), (5, (2, 4, 3, 1))],
)
def test_conv2d_forward_matches_a_direct_loop(k, shape):
    rng = np.random.default_rng(5)
    out = 4
    model = Sequential([Conv2d(out, k)], shape[1:], seed=0, dtype=np.float64)
    model.params.views["0.b"][...] = rng.standard_normal(out)
    x = rng.standard_normal(shape)
    want = conv2d_loop(x, model.params.views["0.W"], model.params.views["0.b"], k)
    got = model.forward(x)
    assert got.shape == want.shape and got.flags.c_contiguous
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize(("k", "c"), [(3, 1), (3, 3), (5, 1), (5, 2), (1, 4)])
def test_im2col_matches_a_plain_loop(dtype, k, c):
    """Both im2col paths (per-tap slices for one channel, one strided view otherwise), on a
    non-contiguous input too, against patch-by-patch copies."""
    rng = np.random.default_rng(8)
    n, h, w = 2, 4, 5
    x = rng.standard_normal((n, w, h, c)).astype(dtype).transpose(0, 2, 1, 3)  # a strided view
    pad = k // 2
    xpad = np.pad(x, ((0, 0), (pad, pad), (pad, pad), (0, 0)))
    want = np.array(
        [
            xpad[s, r : r + k, q : q + k, :].ravel()
            for s in range(n)
            for r in range(h)
            for q in range(w)
        ]
    )
    got = im2col(x, k)
    assert got.dtype == dtype and got.shape == (n * h * w, k * k * c)
    np.testing.assert_array_equal(got, want)


def test_maxpool2d_forward_backward_against_a_plain_loop():
    rng = np.random.default_rng(9)
    x = rng.standard_normal((2, 7, 5, 3))
    x[0, 0, 1, 2] = x[0, 1, 0, 2] = 9.0  # a tie inside one window: the first in row-major wins
    pool = Sequential([MaxPool2d(2)], (7, 5, 3), dtype=np.float64)
    out = pool.forward(x)
    dy = rng.standard_normal(out.shape)
    dx = pool.backward(dy)
    want_dx = np.zeros_like(x)
    for s in range(2):
        for ch in range(3):
            for r in range(3):
                for q in range(2):
                    win = x[s, 2 * r : 2 * r + 2, 2 * q : 2 * q + 2, ch]
                    assert out[s, r, q, ch] == win.max()
                    i, j = np.unravel_index(np.argmax(win), win.shape)
                    want_dx[s, 2 * r + i, 2 * q + j, ch] = dy[s, r, q, ch]
    np.testing.assert_array_equal(dx, want_dx)
    assert dx[0, 0, 1, 2] == dy[0, 0, 0, 2] and dx[0, 1, 0, 2] == 0


def test_maxpool_forward_and_ties():
    x = np.array([[[1.0, 3.0, 2.0, 2.0, -1.0, -5.0, 9.0]]])
    pool = Sequential([MaxPool1d(2)], (1, 7), dtype=np.float64)
    np.testing.assert_array_equal(pool.forward(x), [[[3.0, 2.0, -1.0]]])
    dx = pool.backward(np.array([[[10.0, 20.0, 30.0]]]))
    # a tie (2, 2) sends its gradient to one input only; the dropped remainder gets none
    np.testing.assert_array_equal(dx, [[[0, 10, 20, 0, 30, 0, 0]]])


def test_activations_forward():
    x = np.linspace(-4, 4, 17)
    np.testing.assert_array_equal(Sequential([ReLU()], (17,)).forward(x[None]), [np.maximum(x, 0)])
    np.testing.assert_allclose(
        Sequential([Tanh()], (17,), dtype=np.float64).forward(x[None])[0], np.tanh(x)
    )
    gelu = Sequential([GELU()], (17,), dtype=np.float64).forward(x[None])[0]
    exact = np.array([0.5 * v * (1 + math.erf(v / math.sqrt(2))) for v in x])
    assert np.abs(gelu - exact).max() < 1e-3  # the tanh approximation is within 1e-3 of erf


def test_softmax_cross_entropy_matches_the_definition():
    rng = np.random.default_rng(6)
    logits, y = rng.standard_normal((4, 3)), np.array([0, 2, 1, 2])
    p = np.exp(logits) / np.exp(logits).sum(axis=1, keepdims=True)
    loss, grad = softmax_cross_entropy(logits, y)
    assert loss == pytest.approx(-np.log(p[np.arange(4), y]).mean(), rel=1e-12)
    np.testing.assert_allclose(grad, (p - np.eye(3)[y]) / 4, rtol=1e-12, atol=1e-15)


def test_softmax_cross_entropy_is_stable_for_huge_logits():
    logits = np.array([[1e4, 0.0, -1e4], [-1e4, 1e4, 0.0]], dtype=np.float32)
    loss, grad = softmax_cross_entropy(logits, np.array([0, 0]))
    assert np.isfinite(loss) and np.isfinite(grad).all()
    assert loss == pytest.approx(2e4 / 2)  # the second row is off by 2e4, the first by 0


def test_bad_layer_arguments_are_shape_errors():
    for make in (
        lambda: Conv1d(4, 4),
        lambda: Conv1d(0, 3),
        lambda: Linear(0),
        lambda: MaxPool1d(0),
        lambda: Conv2d(4, 2),
        lambda: Conv2d(0, 3),
        lambda: MaxPool2d(0),
    ):
        with pytest.raises(ShapeError):
            make()
    with pytest.raises(ShapeError, match="conv1d needs"):
        Sequential([Conv1d(2, 3)], (8,))
    with pytest.raises(ShapeError, match="cannot pool"):
        Sequential([MaxPool1d(4)], (2, 3))
    with pytest.raises(ShapeError, match=r"conv2d needs \(N, H, W, C\) input, got .* \(8, 8\)"):
        Sequential([Conv2d(2, 3)], (8, 8))
    with pytest.raises(ShapeError, match="maxpool2d 3 cannot pool per-sample shape \\(2, 8, 1\\)"):
        Sequential([MaxPool2d(3)], (2, 8, 1))
    with pytest.raises(ShapeError, match="cannot reshape per-sample shape \\(64,\\)"):
        Sequential([Reshape((8, 8, 2))], (64,))


def test_conv2d_input_of_the_wrong_shape_is_a_shape_error():
    model = Sequential([Conv2d(2, 3)], (4, 4, 1))
    with pytest.raises(ShapeError, match="model takes inputs of shape \\(N, 4, 4, 1\\)"):
        model.forward(np.zeros((2, 4, 4), np.float32))
