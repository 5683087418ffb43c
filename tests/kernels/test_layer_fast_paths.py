"""The rewritten max-pool, ReLU and conv layers against plain references and, bit for bit, against
the implementations they replaced (kept below as `OldMaxPool1d` / `old_relu`), NaN included.

Max-pool used argmax over a trailing window axis and a float one-hot mask; ReLU multiplied by a
boolean mask; the conv handed on a transposed view. The new code must pick the same maxima (first
one on ties, first NaN), produce the same values, zeros of the same sign, and the same NaN
propagation in both directions.
"""

from __future__ import annotations

import numpy as np
import pytest
from swarmnode.kernels.layers import Conv1d, MaxPool1d, MaxPool2d, ReLU
from swarmnode.kernels.model import Sequential

# 0 * Inf in the masks' products is NaN by design (the old code did the same): not a failure.
pytestmark = pytest.mark.filterwarnings("ignore:invalid value encountered:RuntimeWarning")


class OldMaxPool1d:
    """The previous implementation, verbatim apart from the class plumbing."""

    def __init__(self, size: int) -> None:
        self.size = size

    def forward(self, x: np.ndarray) -> np.ndarray:
        n, c, length = x.shape
        lo = length // self.size
        win = x[:, :, : lo * self.size].reshape(n, c, lo, self.size)
        arg = win.argmax(axis=-1)
        self.mask = (arg[..., None] == np.arange(self.size)).astype(x.dtype)
        self.in_shape = x.shape
        return np.take_along_axis(win, arg[..., None], axis=-1)[..., 0]

    def backward(self, dy: np.ndarray) -> np.ndarray:
        n, c, length = self.in_shape
        lo = length // self.size
        dx = np.zeros(self.in_shape, dtype=dy.dtype)
        dx[:, :, : lo * self.size] = (self.mask * dy[..., None]).reshape(n, c, lo * self.size)
        return dx


def same_bits(a: np.ndarray, b: np.ndarray) -> None:
    """Equal including the sign of zeros and the position of NaNs."""
    assert a.shape == b.shape and a.dtype == b.dtype
    np.testing.assert_array_equal(a.view(np.uint8), np.ascontiguousarray(b).view(np.uint8))


def nasty(rng: np.random.Generator, shape: tuple[int, ...], dtype: type) -> np.ndarray:
    """Values drawn from a small set (many ties), with NaN, +-Inf and signed zeros sprinkled in."""
    pool = np.array([-2.0, -1.0, -0.0, 0.0, 1.0, 2.0, np.nan, np.inf, -np.inf], dtype=dtype)
    x = rng.choice(pool[:6], size=shape)
    special = rng.random(shape) < 0.1
    x[special] = rng.choice(pool, size=int(special.sum()))
    return x.astype(dtype)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize(("size", "length"), [(1, 5), (2, 8), (2, 9), (3, 10), (4, 4), (5, 13)])
def test_maxpool_matches_the_old_implementation_bit_for_bit(size, length, dtype):
    rng = np.random.default_rng(size * 100 + length)
    for trial in range(20):
        x = nasty(rng, (3, 4, length), dtype)
        if trial % 2:  # the conv hands on other layouts too: a transposed view
            x = np.ascontiguousarray(x.transpose(0, 2, 1)).transpose(0, 2, 1)
        old, new = OldMaxPool1d(size), MaxPool1d(size)
        same_bits(new.forward(x), old.forward(x))
        dy = nasty(rng, (3, 4, length // size), dtype)
        same_bits(new.backward(dy), old.backward(dy))


def test_maxpool_against_a_plain_loop():
    rng = np.random.default_rng(1)
    x = rng.standard_normal((2, 3, 11)).astype(np.float32)
    x[0, 0, 2] = x[0, 0, 3]  # a tie
    pool = MaxPool1d(3)
    out = pool.forward(x)
    dy = rng.standard_normal(out.shape).astype(np.float32)
    dx = pool.backward(dy)
    want_dx = np.zeros_like(x)
    for n in range(2):
        for c in range(3):
            for i in range(11 // 3):
                w = x[n, c, 3 * i : 3 * i + 3]
                assert out[n, c, i] == w.max()
                want_dx[n, c, 3 * i + int(np.argmax(w))] = dy[n, c, i]
    np.testing.assert_array_equal(dx, want_dx)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_relu_matches_the_old_implementation_bit_for_bit(dtype):
    rng = np.random.default_rng(2)
    x = nasty(rng, (6, 5, 7), dtype)
    dy = nasty(rng, (6, 5, 7), dtype)
    relu = ReLU()
    old_mask = x > 0
    same_bits(relu.forward(x), x * old_mask)
    same_bits(relu.backward(dy), dy * old_mask)


def test_conv_output_is_contiguous_and_unchanged():
    """The conv now hands on a C-contiguous array; its values are the old transposed view's."""
    rng = np.random.default_rng(3)
    model = Sequential([Conv1d(6, 3)], (4, 9), seed=0)
    model.params.views["0.b"][...] = rng.standard_normal(6)
    x = rng.standard_normal((5, 4, 9)).astype(np.float32)
    out = model.forward(x)
    assert out.flags.c_contiguous
    layer = model.layers[0]
    old = (layer.cols @ layer.p["W"].T + layer.p["b"]).reshape(5, 9, 6).transpose(0, 2, 1)
    same_bits(out, old)


class ArgmaxMaxPool2d:
    """The reference for MaxPool2d: argmax over each flattened S x S window and a one-hot mask,
    the form MaxPool1d replaced (first maximum on ties, first NaN wins)."""

    def __init__(self, size: int) -> None:
        self.size = size

    def forward(self, x: np.ndarray) -> np.ndarray:
        n, h, w, c = x.shape
        s = self.size
        ho, wo = h // s, w // s
        win = x[:, : ho * s, : wo * s].reshape(n, ho, s, wo, s, c).transpose(0, 1, 3, 5, 2, 4)
        win = win.reshape(n, ho, wo, c, s * s)
        arg = win.argmax(axis=-1)
        self.mask = (arg[..., None] == np.arange(s * s)).astype(x.dtype)
        self.in_shape = x.shape
        return np.take_along_axis(win, arg[..., None], axis=-1)[..., 0]

    def backward(self, dy: np.ndarray) -> np.ndarray:
        n, h, w, c = self.in_shape
        s = self.size
        ho, wo = h // s, w // s
        dx = np.zeros(self.in_shape, dtype=dy.dtype)
        d = (self.mask * dy[..., None]).reshape(n, ho, wo, c, s, s).transpose(0, 1, 4, 2, 5, 3)
        dx[:, : ho * s, : wo * s] = d.reshape(n, ho * s, wo * s, c)
        return dx


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize(("size", "h", "w"), [(1, 3, 4), (2, 4, 4), (2, 5, 7), (3, 7, 6)])
def test_maxpool2d_matches_argmax_over_the_window_bit_for_bit(size, h, w, dtype):
    rng = np.random.default_rng(size * 100 + h * 10 + w)
    for trial in range(10):
        x = nasty(rng, (3, h, w, 4), dtype)
        if trial % 2:  # a non-contiguous input: the conv's output reshaped from a transpose
            x = np.ascontiguousarray(x.transpose(0, 3, 1, 2)).transpose(0, 2, 3, 1)
        ref, new = ArgmaxMaxPool2d(size), MaxPool2d(size)
        same_bits(new.forward(x), ref.forward(x))
        dy = nasty(rng, (3, h // size, w // size, 4), dtype)
        same_bits(new.backward(dy), ref.backward(dy))
