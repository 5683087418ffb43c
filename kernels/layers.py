"""NN layers with forward and backward, on numpy or cupy (whichever module the input belongs to).

Each layer declares its parameters (`param_specs`), gets shaped views into the model's flat
buffer (`bind`), initialises them from a host RNG (so CPU and GPU start bit-identical), and
implements `forward(x)` / `backward(dy, need_dx=True) -> dx`, writing its parameter gradients into
the bound gradient views (overwritten, not accumulated). `need_dx=False` lets the first layer with
parameters skip the input gradient nobody reads (for the digits MLP that is a third of the
backward GEMMs). Every op is checked against central finite differences in float64
(tests/kernels/test_ops_gradcheck.py). Layouts: dense (N, F); sequences (N, C, L); images
(N, H, W, C), channels last (why: docs/architecture.md, "2-D convolution").
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from swarmnode.kernels.backend import array_module
from swarmnode.kernels.errors import ShapeError

Shape = tuple[int, ...]


class Layer:
    """Base: no parameters, shape-preserving."""

    def param_specs(self, in_shape: Shape) -> list[tuple[str, Shape]]:
        return []

    def out_shape(self, in_shape: Shape) -> Shape:
        return in_shape

    def bind(self, params: dict[str, Any], grads: dict[str, Any]) -> None:
        self.p, self.g = params, grads

    def init(self, views: dict[str, np.ndarray], rng: np.random.Generator) -> None:
        """Fill host arrays `views` (same keys as param_specs) with initial values."""

    def forward(self, x: Any) -> Any:
        raise NotImplementedError

    def backward(self, dy: Any, need_dx: bool = True) -> Any:
        raise NotImplementedError


class Linear(Layer):
    def __init__(self, out_features: int) -> None:
        if out_features < 1:
            raise ShapeError(f"linear layer needs >= 1 output, got {out_features}")
        self.out_features = out_features

    def param_specs(self, in_shape: Shape) -> list[tuple[str, Shape]]:
        if len(in_shape) != 1:
            raise ShapeError(f"linear needs flat (N, F) input, got per-sample shape {in_shape}")
        return [("W", (in_shape[0], self.out_features)), ("b", (self.out_features,))]

    def out_shape(self, in_shape: Shape) -> Shape:
        return (self.out_features,)

    def init(self, views: dict[str, np.ndarray], rng: np.random.Generator) -> None:
        fan_in = views["W"].shape[0]
        views["W"][...] = rng.standard_normal(views["W"].shape) * math.sqrt(2.0 / fan_in)
        views["b"][...] = 0.0

    def forward(self, x: Any) -> Any:
        self.x = x
        return x @ self.p["W"] + self.p["b"]

    def backward(self, dy: Any, need_dx: bool = True) -> Any:
        xp = array_module(dy)
        xp.matmul(self.x.T, dy, out=self.g["W"])
        dy.sum(axis=0, out=self.g["b"])
        return dy @ self.p["W"].T if need_dx else None


class ReLU(Layer):
    def forward(self, x: Any) -> Any:
        # The mask is kept as 0/1 in x's dtype: float-times-bool products cast the mask through
        # a buffer on every call (~3x slower), and the backward pass below is one of them.
        # x * mask (not maximum or where) keeps NaN flowing through and -0.0 where x < 0.
        self.mask = (x > 0).astype(x.dtype)
        return x * self.mask

    def backward(self, dy: Any, need_dx: bool = True) -> Any:
        return dy * self.mask


class Tanh(Layer):
    def forward(self, x: Any) -> Any:
        self.y = array_module(x).tanh(x)
        return self.y

    def backward(self, dy: Any, need_dx: bool = True) -> Any:
        return dy * (1.0 - self.y * self.y)


_GELU_C = math.sqrt(2.0 / math.pi)


class GELU(Layer):
    """The tanh approximation (Hendrycks & Gimpel 2016), as in GPT-2 and BERT."""

    def forward(self, x: Any) -> Any:
        xp = array_module(x)
        self.x = x
        self.t = xp.tanh(_GELU_C * (x + 0.044715 * x**3))
        return 0.5 * x * (1.0 + self.t)

    def backward(self, dy: Any, need_dx: bool = True) -> Any:
        x, t = self.x, self.t
        dt = (1.0 - t * t) * _GELU_C * (1.0 + 3 * 0.044715 * x * x)
        return dy * (0.5 * (1.0 + t) + 0.5 * x * dt)


class Flatten(Layer):
    def out_shape(self, in_shape: Shape) -> Shape:
        return (int(np.prod(in_shape)),)

    def forward(self, x: Any) -> Any:
        self.shape = x.shape
        return x.reshape(x.shape[0], -1)

    def backward(self, dy: Any, need_dx: bool = True) -> Any:
        return dy.reshape(self.shape)


def _conv_shape(out_channels: int, kernel: int) -> tuple[int, int]:
    """A conv layer's (out_channels, kernel), checked: odd kernels keep 'same' padding symmetric."""
    if kernel < 1 or kernel % 2 == 0:
        raise ShapeError(f"conv kernel size must be odd and >= 1, got {kernel}")
    if out_channels < 1:
        raise ShapeError(f"conv layer needs >= 1 output channel, got {out_channels}")
    return out_channels, kernel


class Conv1d(Layer):
    """1-D convolution, stride 1, 'same' zero padding (odd kernels), as im2col + one GEMM."""

    def __init__(self, out_channels: int, kernel: int) -> None:
        self.out_channels, self.k = _conv_shape(out_channels, kernel)

    def param_specs(self, in_shape: Shape) -> list[tuple[str, Shape]]:
        if len(in_shape) != 2:
            raise ShapeError(f"conv1d needs (N, C, L) input, got per-sample shape {in_shape}")
        return [("W", (self.out_channels, in_shape[0] * self.k)), ("b", (self.out_channels,))]

    def out_shape(self, in_shape: Shape) -> Shape:
        return (self.out_channels, in_shape[1])

    def init(self, views: dict[str, np.ndarray], rng: np.random.Generator) -> None:
        fan_in = views["W"].shape[1]
        views["W"][...] = rng.standard_normal(views["W"].shape) * math.sqrt(2.0 / fan_in)
        views["b"][...] = 0.0

    def forward(self, x: Any) -> Any:
        xp = array_module(x)
        n, c, length = x.shape
        pad = self.k // 2
        xpad = xp.pad(x, ((0, 0), (0, 0), (pad, pad)))
        # cols[n, l, c, j] = xpad[n, c, l + j]: k shifted slices, no per-sample loop
        cols = xp.stack([xpad[:, :, j : j + length] for j in range(self.k)], axis=-1)
        self.cols = cols.transpose(0, 2, 1, 3).reshape(n * length, c * self.k)
        self.in_shape = x.shape
        out = self.cols @ self.p["W"].T + self.p["b"]  # (N*L, out)
        # Handed on C-contiguous: the transposed view made every elementwise op downstream mix
        # layouts with the contiguous gradients coming back (ReLU backward ran 14x slower).
        return xp.ascontiguousarray(out.reshape(n, length, self.out_channels).transpose(0, 2, 1))

    def backward(self, dy: Any, need_dx: bool = True) -> Any:
        xp = array_module(dy)
        n, c, length = self.in_shape
        dyr = dy.transpose(0, 2, 1).reshape(n * length, self.out_channels)
        xp.matmul(dyr.T, self.cols, out=self.g["W"])
        dyr.sum(axis=0, out=self.g["b"])
        if not need_dx:
            return None
        dcols = (dyr @ self.p["W"]).reshape(n, length, c, self.k).transpose(0, 2, 1, 3)
        pad = self.k // 2
        dxpad = xp.zeros((n, c, length + 2 * pad), dtype=dy.dtype)
        for j in range(self.k):  # k is a handful: the loop is over taps, not samples
            dxpad[:, :, j : j + length] += dcols[..., j]
        return dxpad[:, :, pad : pad + length]


class MaxPool1d(Layer):
    """Non-overlapping max pooling over the last axis; a trailing remainder is dropped."""

    def __init__(self, size: int) -> None:
        if size < 1:
            raise ShapeError(f"pool size must be >= 1, got {size}")
        self.size = size

    def out_shape(self, in_shape: Shape) -> Shape:
        if len(in_shape) != 2 or in_shape[1] < self.size:
            raise ShapeError(f"maxpool {self.size} cannot pool per-sample shape {in_shape}")
        return (in_shape[0], in_shape[1] // self.size)

    def forward(self, x: Any) -> Any:
        xp = array_module(x)
        s = self.size
        lo = x.shape[2] // s
        self.in_shape = x.shape
        # The window's taps as strided views (no copy, any input layout); a running maximum over
        # them costs a few passes per tap, where argmax over a trailing axis of size 2 cost ~10x.
        taps = [x[:, :, j : lo * s : s] for j in range(s)]
        best = taps[0].copy()
        arg = xp.zeros(best.shape, dtype=xp.uint8 if s <= 256 else xp.int64)
        for j in range(1, s):
            take = _takes_over(best, taps[j], xp)
            xp.copyto(best, taps[j], where=take)
            xp.copyto(arg, j, where=take)
        # one 0/1 mask per tap in x's dtype: backward is then a plain product per tap, as the
        # one-hot product it replaces (same zeros, same NaN propagation)
        self.masks = [(arg == j).astype(x.dtype) for j in range(s)]
        return best

    def backward(self, dy: Any, need_dx: bool = True) -> Any:
        xp = array_module(dy)
        s = self.size
        lo = dy.shape[2]
        dx = xp.empty(self.in_shape, dtype=dy.dtype)
        dx[:, :, lo * s :] = 0  # the dropped remainder gets no gradient
        for j, mask in enumerate(self.masks):
            xp.multiply(dy, mask, out=dx[:, :, j : lo * s : s])
        return dx


class Conv2d(Layer):
    """2-D convolution on (N, H, W, C) images: stride 1, 'same' zero padding (odd square kernels),
    as im2col + one GEMM.

    Channels last, so the GEMM's (N*H*W, out) result already is the next layer's (N, H, W, out)
    input (no transpose copy), and each patch row is k*k contiguous runs of C values. The weight
    is (k*k*C, out), rows in (row tap, column tap, in-channel) order, as `cols @ W` reads it.
    The input gradient is the convolution of dy with the kernel turned 180 degrees and its
    channel axes swapped: a second im2col + GEMM, where scattering the patch gradients back
    (col2im) took k*k strided adds that cost more than the GEMM they came from.
    """

    def __init__(self, out_channels: int, kernel: int) -> None:
        self.out_channels, self.k = _conv_shape(out_channels, kernel)

    def param_specs(self, in_shape: Shape) -> list[tuple[str, Shape]]:
        if len(in_shape) != 3:
            raise ShapeError(f"conv2d needs (N, H, W, C) input, got per-sample shape {in_shape}")
        k, c = self.k, in_shape[2]
        return [("W", (k * k * c, self.out_channels)), ("b", (self.out_channels,))]

    def out_shape(self, in_shape: Shape) -> Shape:
        return (in_shape[0], in_shape[1], self.out_channels)

    def init(self, views: dict[str, np.ndarray], rng: np.random.Generator) -> None:
        fan_in = views["W"].shape[0]
        views["W"][...] = rng.standard_normal(views["W"].shape) * math.sqrt(2.0 / fan_in)
        views["b"][...] = 0.0

    def forward(self, x: Any) -> Any:
        n, h, w, _ = x.shape
        self.in_shape = x.shape
        self.cols = im2col(x, self.k)  # (N*H*W, k*k*C), kept for the weight gradient
        out = self.cols @ self.p["W"]
        out += self.p["b"]
        return out.reshape(n, h, w, self.out_channels)

    def backward(self, dy: Any, need_dx: bool = True) -> Any:
        xp = array_module(dy)
        n, h, w, c = self.in_shape
        dyr = dy.reshape(n * h * w, self.out_channels)
        xp.matmul(self.cols.T, dyr, out=self.g["W"])
        # a GEMV with ones: sum(axis=0) over the N*H*W rows of a narrow matrix ran ~9x slower
        xp.matmul(xp.ones(n * h * w, dtype=dy.dtype), dyr, out=self.g["b"])
        if not need_dx:
            return None
        k = self.k
        # W_flip[i, j, o, c] = W[k-1-i, k-1-j, c, o]: 'same' padding makes the adjoint of this
        # convolution a 'same' convolution of dy with that kernel
        w_flip = self.p["W"].reshape(k, k, c, self.out_channels)[::-1, ::-1].transpose(0, 1, 3, 2)
        w_flip = xp.ascontiguousarray(w_flip).reshape(k * k * self.out_channels, c)
        return (im2col(dy, k) @ w_flip).reshape(n, h, w, c)


def im2col(x: Any, k: int) -> Any:
    """(N, H, W, C) -> (N*H*W, k*k*C): row (n, y, x) holds the k x k patch centred on pixel
    (y, x) of the zero-padded image, in (row tap, column tap, channel) order.

    The patches are one strided view of the padded image (as_strided over (N, H, W, k, k, C): no
    per-tap, no per-sample loop), copied once; the copy's contiguous runs are k*C values long. With
    one channel those runs are too short (k values), and k*k slice copies, whose runs are whole
    image rows, are ~2.5x faster; with 2 or more channels the strided copy is 2.5-4x faster than
    the slices (digits-sized images, batch 128). Same code on numpy and cupy.
    """
    xp = array_module(x)
    n, h, w, c = x.shape
    pad = k // 2
    # zeros + one interior copy: xp.pad took ~10x longer for these small images
    xpad = xp.zeros((n, h + 2 * pad, w + 2 * pad, c), dtype=x.dtype)
    xpad[:, pad : pad + h, pad : pad + w, :] = x
    if c == 1:
        cols = xp.empty((n, h, w, k, k, c), dtype=x.dtype)
        for i in range(k):  # k*k taps: a handful, never a loop over samples or pixels
            for j in range(k):
                cols[:, :, :, i, j, :] = xpad[:, i : i + h, j : j + w, :]
    else:
        s0, s1, s2, s3 = xpad.strides
        view = xp.lib.stride_tricks.as_strided(xpad, (n, h, w, k, k, c), (s0, s1, s2, s1, s2, s3))
        cols = xp.ascontiguousarray(view)
    return cols.reshape(n * h * w, k * k * c)


class MaxPool2d(Layer):
    """Non-overlapping S x S max pooling of (N, H, W, C); trailing rows/columns that do not
    fill a window are dropped. Ties go to the first maximum in row-major window order, NaN wins
    (as argmax over the flattened window, like MaxPool1d).

    The S*S window taps are first gathered by one strided copy into an (S*S, M) array. Working
    on contiguous taps keeps every elementwise op below one flat vectorised loop, where strided
    4-D views run N*H*W inner loops of only C values. Backward scatters the (S*S, M) gradients
    back with one copy.
    """

    def __init__(self, size: int) -> None:
        if size < 1:
            raise ShapeError(f"pool size must be >= 1, got {size}")
        self.size = size

    def out_shape(self, in_shape: Shape) -> Shape:
        s = self.size
        if len(in_shape) != 3 or in_shape[0] < s or in_shape[1] < s:
            raise ShapeError(f"maxpool2d {s} cannot pool per-sample shape {in_shape}")
        return (in_shape[0] // s, in_shape[1] // s, in_shape[2])

    def _windows(self, a: Any) -> Any:
        """(N, H, W, C) -> a (S, S, N, Ho, Wo, C) view of the pooled part (splitting an axis
        never copies, whatever the strides)."""
        s = self.size
        n, h, w, c = a.shape
        ho, wo = h // s, w // s
        win = a[:, : ho * s, : wo * s, :].reshape(n, ho, s, wo, s, c)
        return win.transpose(2, 4, 0, 1, 3, 5)

    def forward(self, x: Any) -> Any:
        xp = array_module(x)
        s = self.size
        n, h, w, c = x.shape
        self.in_shape = x.shape
        taps = xp.ascontiguousarray(self._windows(x)).reshape(s * s, -1)
        # Branch-free: copyto(where=) and where() on these 0/1 patterns (ReLU output is half
        # zeros) cost ~60 us per tap at batch 128, the ops below ~5 us in all. `running` is the
        # maximum so far by value (NaN sticks): exactly what _takes_over compares against.
        index = xp.uint8 if s * s <= 256 else xp.int64
        running = taps[0].copy()
        arg = xp.zeros(running.shape, dtype=index)
        for t in range(1, s * s):
            take = _takes_over(running, taps[t], xp)
            step = take.astype(index) * index(t)  # (an explicit dtype: cupy promotes on its own)
            xp.maximum(arg, step, out=arg)  # t exceeds every earlier index: this is "arg = t"
            xp.maximum(running, taps[t], out=running)
        # the output is the input value at arg, bit for bit (a maximum's -0.0 vs +0.0 may not be)
        m = running.size
        best = taps.reshape(-1)[arg.astype(xp.intp) * m + xp.arange(m)]
        # one 0/1 mask row per tap, in x's dtype: backward is one broadcast product
        self.masks = (arg == xp.arange(s * s, dtype=arg.dtype)[:, None]).astype(x.dtype)
        return best.reshape(n, h // s, w // s, c)

    def backward(self, dy: Any, need_dx: bool = True) -> Any:
        xp = array_module(dy)
        s = self.size
        ho, wo = dy.shape[1], dy.shape[2]
        dx = xp.empty(self.in_shape, dtype=dy.dtype)
        dx[:, ho * s :] = 0  # the dropped rows and columns get no gradient
        dx[:, :, wo * s :] = 0
        dtaps = self.masks * dy.reshape(1, -1)
        self._windows(dx)[...] = dtaps.reshape(s, s, *dy.shape)
        return dx


class Reshape(Layer):
    """Each sample to `shape` (same number of values, row-major): flat features to images."""

    def __init__(self, shape: Shape) -> None:
        self.shape = tuple(int(d) for d in shape)

    def out_shape(self, in_shape: Shape) -> Shape:
        if math.prod(in_shape) != math.prod(self.shape):
            raise ShapeError(
                f"cannot reshape per-sample shape {in_shape} ({math.prod(in_shape)} values) "
                f"to {self.shape} ({math.prod(self.shape)} values)"
            )
        return self.shape

    def forward(self, x: Any) -> Any:
        self.in_shape = x.shape
        return x.reshape(x.shape[0], *self.shape)

    def backward(self, dy: Any, need_dx: bool = True) -> Any:
        return dy.reshape(self.in_shape)


def _takes_over(best: Any, tap: Any, xp: Any) -> Any:
    """Where `tap` replaces the running maximum `best`, exactly as argmax picks.

    argmax keeps the first maximum (a tie stays with the earlier tap) and treats NaN as the
    largest value (the first NaN wins): a tap takes over unless the maximum so far is >= it,
    and never from a NaN maximum. `not (best >= tap)` is also true where tap is NaN.
    """
    take = best >= tap
    xp.logical_not(take, out=take)
    take &= best == best
    return take


def softmax_cross_entropy(logits: Any, y: Any) -> tuple[float, Any]:
    """Mean cross-entropy of integer labels `y` and its gradient w.r.t. `logits`.

    Shifting by the row maximum keeps exp() finite for any logits, and makes every row sum >= 1,
    so log() never sees zero.
    """
    xp = array_module(logits)
    n = logits.shape[0]
    z = logits - logits.max(axis=1, keepdims=True)
    e = xp.exp(z)
    total = e.sum(axis=1, keepdims=True)
    rows = xp.arange(n)
    loss = (xp.log(total[:, 0]) - z[rows, y]).sum() / n
    grad = e
    grad /= total
    grad[rows, y] -= 1.0
    grad *= 1.0 / n
    return float(loss), grad


class AddChannel(Layer):
    """(N, L) -> (N, 1, L): lets a conv net read flat signals."""

    def out_shape(self, in_shape: Shape) -> Shape:
        return (1, *in_shape)

    def forward(self, x: Any) -> Any:
        return x[:, None, :]

    def backward(self, dy: Any, need_dx: bool = True) -> Any:
        return dy[:, 0, :]
