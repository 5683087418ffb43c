"""Models by spec string.

Grammar (whitespace is ignored; an optional `/ACT` suffix picks the activation of every hidden
layer: `relu` (default), `gelu` or `tanh`):

    linear                      multinomial logistic regression (no hidden layer); also `mlp:`
    mlp:W1,W2,...               dense hidden layers of widths W1, W2, ... then the classifier
                                e.g. `mlp:128`, `mlp:256,128/gelu`
    cnn1d:T1,T2,...             a small 1-D conv net; each token is one of
                                  CkK   convolution with C output channels, kernel K (odd),
                                        'same' padding, then the activation    e.g. `16k5`
                                  pS    max-pooling of size S                  e.g. `p2`
                                  W     a dense layer of width W (after flattening)
                                then the classifier, e.g. `cnn1d:16k5,p2,32k3,p2,64`
    cnn2d:[IMG,]T1,T2,...       a small 2-D conv net on images, same tokens as cnn1d with square
                                kernels (`16k3`: 3x3) and square pools (`p2`: 2x2 windows),
                                e.g. `cnn2d:16k3,p2,32k3,p2,64`. IMG, optional and first, is the
                                image shape HxW or HxWxC (channels last), e.g. `8x8` or `32x32x3`:
                                each sample's values are read row-major in that shape. Without it
                                (H, W) samples are one-channel images and (H, W, C) samples are
                                taken as they are; flat samples need it.

Inputs: an MLP flattens each sample. cnn1d reads (N, C, L): 2-D samples (H, W) are taken as
H channels of length W — the 8x8 digits are 8 channels of 8 pixels each (one image row per
channel, convolving along the columns) — and 1-D samples (L,) as one channel of length L. Conv
and pool tokens must come before dense tokens. Every model ends in a dense classifier of
`n_classes` outputs trained with softmax cross-entropy.

cnn2d reads (N, H, W, C): images are channels last, as PIL, imageio and Keras hand them out (why
the kernels chose it: docs/architecture.md, "2-D convolution"); the 8x8 digits are 8x8x1.
Channels-first (C, H, W) data, as torchvision makes it, must be transposed to (H, W, C) before it
is saved: read as HxWxC its values would land in the wrong pixels, and no check can tell, since
the count of values is the same.

Convolutions have stride 1 and 'same' zero padding (so the length, or height and width, is kept);
pooling windows do not overlap and a trailing remainder shorter than the window is dropped. A model over MAX_PARAMS
parameters is refused before anything is allocated (a typo like `mlp:100000,100000` should be an
error message, not an out-of-memory kill).
"""

from __future__ import annotations

import math
import re
from numbers import Integral

from swarmnode.kernels.backend import Backend
from swarmnode.kernels.errors import ShapeError
from swarmnode.kernels.layers import (
    GELU,
    AddChannel,
    Conv1d,
    Conv2d,
    Flatten,
    Layer,
    Linear,
    MaxPool1d,
    MaxPool2d,
    ReLU,
    Reshape,
    Tanh,
)
from swarmnode.kernels.model import Sequential, count_params, plan
from swarmnode.node.train.errors import ModelSpecError

ACTIVATIONS = {"relu": ReLU, "gelu": GELU, "tanh": Tanh}
KINDS = ("mlp", "cnn1d", "cnn2d", "linear")
# [0-9], not \d or str.isdigit(): those accept other scripts' digits and superscripts ('²'),
# which int() then rejects or reads differently from what the user saw.
_CONV = re.compile(r"^([0-9]+)k([0-9]+)$")
_POOL = re.compile(r"^p([0-9]+)$")
_WIDTH = re.compile(r"^[0-9]+$")
_IMAGE = re.compile(r"^([0-9]+)x([0-9]+)(?:x([0-9]+))?$")
MAX_PARAMS = 500_000_000  # 2 GB of float32, before gradients and optimizer state


def build_model(
    spec: str, input_shape: tuple[int, ...], n_classes: int, backend: Backend, seed: int
) -> Sequential:
    """Parse `spec` and build the model; `ModelSpecError` names what is wrong."""
    input_shape = _check_shape(input_shape)
    if isinstance(n_classes, bool) or not isinstance(n_classes, Integral) or n_classes < 2:
        raise ModelSpecError(f"a classifier needs n_classes >= 2, got {n_classes!r}")
    kind, tokens, act = parse_spec(spec)
    if kind == "cnn1d":
        layers = _cnn1d_layers(tokens, act, input_shape, spec)
    elif kind == "cnn2d":
        layers = _cnn2d_layers(tokens, act, input_shape, spec)
    else:
        layers = [Flatten(), *_dense_layers(tokens, act, spec)]
    layers.append(Linear(n_classes))
    try:
        n_params = count_params(plan(layers, input_shape)[0])
    except ShapeError as exc:
        raise ModelSpecError(
            f"model {spec!r} does not fit inputs of shape {input_shape}: {exc}"
        ) from None
    if n_params > MAX_PARAMS:
        raise ModelSpecError(
            f"model {spec!r} has {n_params:,} parameters (at most {MAX_PARAMS:,} supported)"
        )
    return Sequential(layers, input_shape, backend=backend, seed=seed)


def _check_shape(input_shape: tuple[int, ...]) -> tuple[int, ...]:
    try:
        shape = tuple(int(d) for d in input_shape)
    except (TypeError, ValueError):
        raise ModelSpecError(f"input shape must be a tuple of ints, got {input_shape!r}") from None
    if not shape or any(d < 1 for d in shape):
        raise ModelSpecError(f"input shape must be non-empty with dims >= 1, got {shape}")
    return shape


def parse_spec(spec: str) -> tuple[str, list[str], type[Layer]]:
    """(kind, layer tokens, activation class); syntax errors only, shapes are checked later."""
    if not isinstance(spec, str):
        raise ModelSpecError(f"model spec must be a string, got {type(spec).__name__}")
    text = "".join(spec.split()).lower()
    if not text:
        raise ModelSpecError("empty model spec (expected e.g. mlp:128 or cnn1d:16k5,p2,64)")
    body, _, act_name = text.partition("/")
    act = ACTIVATIONS.get(act_name or "relu")
    if act is None:
        raise ModelSpecError(
            f"unknown activation {act_name!r} in {spec!r} (expected relu, gelu, tanh)"
        )
    kind, _, rest = body.partition(":")
    if kind not in KINDS:
        raise ModelSpecError(
            f"unknown model kind {kind!r} in {spec!r} (expected {', '.join(KINDS)})"
        )
    tokens = [t for t in rest.split(",") if t] if rest else []
    if kind == "linear" and tokens:
        raise ModelSpecError(f"'linear' takes no layers, got {spec!r}")
    if kind == "cnn1d" and not any(_CONV.match(t) for t in tokens):
        raise ModelSpecError(f"cnn1d needs at least one conv token like 16k5, got {spec!r}")
    if kind == "cnn2d" and not any(_CONV.match(t) for t in tokens):
        raise ModelSpecError(f"cnn2d needs at least one conv token like 16k3, got {spec!r}")
    return kind, tokens, act


def _dense_layers(tokens: list[str], act: type[Layer], spec: str) -> list[Layer]:
    layers: list[Layer] = []
    for t in tokens:
        if not _WIDTH.match(t) or int(t) < 1:
            raise ModelSpecError(f"bad layer width {t!r} in {spec!r} (expected a positive integer)")
        layers += [Linear(int(t)), act()]
    return layers


def _cnn1d_layers(
    tokens: list[str], act: type[Layer], input_shape: tuple[int, ...], spec: str
) -> list[Layer]:
    layers: list[Layer] = [AddChannel()] if len(input_shape) == 1 else []
    if len(input_shape) not in (1, 2):
        raise ModelSpecError(f"cnn1d reads (C, L) or (L,) samples, got shape {input_shape}")
    return [*layers, *_conv_stack(tokens, act, spec, Conv1d, MaxPool1d)]


def _cnn2d_layers(
    tokens: list[str], act: type[Layer], input_shape: tuple[int, ...], spec: str
) -> list[Layer]:
    odd = [t for t in tokens if "x" in t and not _IMAGE.match(t)]
    if odd:
        raise ModelSpecError(
            f"bad image shape {odd[0]!r} in {spec!r} (expected HxW or HxWxC, e.g. 8x8 or 32x32x3)"
        )
    given = _IMAGE.match(tokens[0]) if tokens else None
    image = _image_shape(given, tokens[0] if given else None, input_shape, spec)
    rest = tokens[1:] if given else tokens
    late = [t for t in rest if _IMAGE.match(t)]
    if late:
        raise ModelSpecError(f"image shape {late[0]!r} must be the first token of {spec!r}")
    return [Reshape(image), *_conv_stack(rest, act, spec, Conv2d, MaxPool2d)]


def _image_shape(
    given: re.Match[str] | None, token: str | None, input_shape: tuple[int, ...], spec: str
) -> tuple[int, int, int]:
    """(H, W, C) from the spec's IMG token, else from the data's per-sample shape."""
    n_values = math.prod(input_shape)
    if given is not None:
        h, w, c = int(given.group(1)), int(given.group(2)), int(given.group(3) or 1)
        if min(h, w, c) < 1 or h * w * c != n_values:
            raise ModelSpecError(
                f"image shape {token!r} in {spec!r} holds {h * w * c} values but each sample "
                f"has {n_values} (shape {input_shape}): give HxW or HxWxC with "
                f"H*W*C = {n_values}"
            )
        return h, w, c
    if len(input_shape) == 2:
        return input_shape[0], input_shape[1], 1
    if len(input_shape) == 3:
        return input_shape[0], input_shape[1], input_shape[2]
    side = math.isqrt(n_values)
    example = f"{side}x{side}" if side * side == n_values else "HxW"
    raise ModelSpecError(
        f"cnn2d reads (H, W) or (H, W, C) images but samples have shape {input_shape}: "
        f"start the spec with the image shape, e.g. cnn2d:{example},{spec.split(':', 1)[1]}"
    )


def _conv_stack(
    tokens: list[str], act: type[Layer], spec: str, conv: type[Layer], pool: type[Layer]
) -> list[Layer]:
    """Conv and pool tokens, then dense ones: the body shared by cnn1d and cnn2d."""
    layers: list[Layer] = []
    i = 0
    while i < len(tokens) and (_CONV.match(tokens[i]) or _POOL.match(tokens[i])):
        conv_m, pool_m = _CONV.match(tokens[i]), _POOL.match(tokens[i])
        if conv_m:
            channels, k = int(conv_m.group(1)), int(conv_m.group(2))
            if channels < 1 or k < 1 or k % 2 == 0:
                raise ModelSpecError(
                    f"conv token {tokens[i]!r} in {spec!r}: need channels >= 1 and an odd kernel"
                )
            layers += [conv(channels, k), act()]
        else:
            size = int(pool_m.group(1))
            if size < 1:
                raise ModelSpecError(f"pool token {tokens[i]!r} in {spec!r}: size must be >= 1")
            layers.append(pool(size))
        i += 1
    rest = tokens[i:]
    bad = [t for t in rest if _CONV.match(t) or _POOL.match(t)]
    if bad:
        raise ModelSpecError(f"conv/pool token {bad[0]!r} after a dense layer in {spec!r}")
    return [*layers, Flatten(), *_dense_layers(rest, act, spec)]
