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

Inputs: an MLP flattens each sample. A conv net reads (N, C, L): 2-D samples (H, W) are taken as
H channels of length W — the 8x8 digits are 8 channels of 8 pixels each (one image row per
channel, convolving along the columns) — and 1-D samples (L,) as one channel of length L. Conv
and pool tokens must come before dense tokens. Every model ends in a dense classifier of
`n_classes` outputs trained with softmax cross-entropy.

Convolutions have stride 1 and 'same' zero padding (so the length is kept); pooling windows do
not overlap and a trailing remainder shorter than the window is dropped. A model over MAX_PARAMS
parameters is refused before anything is allocated (a typo like `mlp:100000,100000` should be an
error message, not an out-of-memory kill).
"""

from __future__ import annotations

import re
from numbers import Integral

from swarmnode.kernels.backend import Backend
from swarmnode.kernels.errors import ShapeError
from swarmnode.kernels.layers import (
    GELU,
    AddChannel,
    Conv1d,
    Flatten,
    Layer,
    Linear,
    MaxPool1d,
    ReLU,
    Tanh,
)
from swarmnode.kernels.model import Sequential, count_params, plan
from swarmnode.node.train.errors import ModelSpecError

ACTIVATIONS = {"relu": ReLU, "gelu": GELU, "tanh": Tanh}
KINDS = ("mlp", "cnn1d", "linear")
# [0-9], not \d or str.isdigit(): those accept other scripts' digits and superscripts ('²'),
# which int() then rejects or reads differently from what the user saw.
_CONV = re.compile(r"^([0-9]+)k([0-9]+)$")
_POOL = re.compile(r"^p([0-9]+)$")
_WIDTH = re.compile(r"^[0-9]+$")
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
    i = 0
    while i < len(tokens) and (_CONV.match(tokens[i]) or _POOL.match(tokens[i])):
        conv, pool = _CONV.match(tokens[i]), _POOL.match(tokens[i])
        if conv:
            channels, k = int(conv.group(1)), int(conv.group(2))
            if channels < 1 or k < 1 or k % 2 == 0:
                raise ModelSpecError(
                    f"conv token {tokens[i]!r} in {spec!r}: need channels >= 1 and an odd kernel"
                )
            layers += [Conv1d(channels, k), act()]
        else:
            size = int(pool.group(1))
            if size < 1:
                raise ModelSpecError(f"pool token {tokens[i]!r} in {spec!r}: size must be >= 1")
            layers.append(MaxPool1d(size))
        i += 1
    rest = tokens[i:]
    bad = [t for t in rest if _CONV.match(t) or _POOL.match(t)]
    if bad:
        raise ModelSpecError(f"conv/pool token {bad[0]!r} after a dense layer in {spec!r}")
    return [*layers, Flatten(), *_dense_layers(rest, act, spec)]
