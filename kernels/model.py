"""`Sequential`: layers whose parameters are views into one `FlatParams` buffer.

Initialisation runs on the host from one seeded numpy stream and is then copied to the device, so
a CPU peer and a GPU peer built with the same seed start from bit-identical parameters.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
from swarmnode.kernels.backend import CPU, Backend, is_device_array
from swarmnode.kernels.errors import ShapeError
from swarmnode.kernels.flat import FlatParams, Spec
from swarmnode.kernels.layers import Layer, softmax_cross_entropy

EVAL_BATCH = 4096  # bounds the activations kept alive while evaluating a large set


def plan(layers: Sequence[Layer], input_shape: tuple[int, ...]) -> tuple[list[list[Spec]], Any]:
    """Each layer's parameter specs (names prefixed by the layer index) and the output shape.

    Pure shape arithmetic, nothing allocated: callers may check the parameter count first.
    Raises ShapeError when a layer cannot take the shape it is given.
    """
    per_layer: list[list[Spec]] = []
    shape = tuple(int(d) for d in input_shape)
    for i, layer in enumerate(layers):
        per_layer.append([(f"{i}.{name}", s) for name, s in layer.param_specs(shape)])
        shape = layer.out_shape(shape)
    return per_layer, shape


def count_params(per_layer: list[list[Spec]]) -> int:
    return sum(math.prod(s) for specs in per_layer for _, s in specs)  # Python ints: no overflow


class Sequential:
    """A feed-forward classifier: `forward`, `backward`, `loss_and_grad`, `evaluate`, `predict`."""

    def __init__(
        self,
        layers: Sequence[Layer],
        input_shape: tuple[int, ...],
        *,
        backend: Backend = CPU,
        seed: int = 0,
        dtype: Any = np.float32,
    ) -> None:
        self.layers = list(layers)
        self.backend = backend
        self.input_shape = tuple(int(d) for d in input_shape)
        per_layer, self.output_shape = plan(self.layers, self.input_shape)
        self.params = FlatParams([s for specs in per_layer for s in specs], backend.xp, dtype)
        self._init(per_layer, seed)
        # Layers before the first one with parameters need no backward pass at all in training.
        with_params = [i for i, specs in enumerate(per_layer) if specs]
        self._first_param_layer = with_params[0] if with_params else len(self.layers)

    def _init(self, per_layer: list[list[Spec]], seed: int) -> None:
        host = FlatParams([s for specs in per_layer for s in specs], np, self.params.dtype)
        rng = np.random.default_rng(seed)
        for layer, specs in zip(self.layers, per_layer, strict=True):
            local = [(name, name.split(".", 1)[1]) for name, _ in specs]
            layer.init({short: host.views[full] for full, short in local}, rng)
            layer.bind(
                {short: self.params.views[full] for full, short in local},
                {short: self.params.grads[full] for full, short in local},
            )
        self.params.data[...] = self.backend.asarray(host.data)

    @property
    def num_params(self) -> int:
        return self.params.size

    def forward(self, x: Any, train: bool = True) -> Any:
        """Logits of a batch `x` of shape (N, *input_shape). No layer behaves differently in
        training yet (no dropout / batch norm); `train` is kept so callers need not change."""
        x = self._input(x)
        for layer in self.layers:
            x = layer.forward(x)
        return x

    def backward(self, dlogits: Any) -> Any:
        """Parameter gradients into `params.grad`; returns the gradient w.r.t. the input."""
        for layer in reversed(self.layers):
            dlogits = layer.backward(dlogits)
        return dlogits

    def loss_and_grad(self, x: Any, y: Any, logit_offset: Any = None) -> float:
        """Mean batch loss; overwrites `params.grad` with its gradient. `logit_offset` (one value
        per class, on the model's device) is added to the logits inside the loss only: a
        logit-adjusted loss (Menon et al. 2021); evaluation and prediction never see it."""
        logits = self.forward(x)
        self._check_labels(y, len(logits))
        if logit_offset is not None:
            # a new array: the last layer may keep its output for its own backward (Tanh does)
            logits = logits + logit_offset
        loss, d = softmax_cross_entropy(logits, y)
        first = self._first_param_layer
        for i in range(len(self.layers) - 1, first - 1, -1):
            d = self.layers[i].backward(d, need_dx=i != first)
        return loss

    def evaluate(self, x: Any, y: Any) -> tuple[float, float]:
        """(mean loss, accuracy) over (x, y), in batches, without touching gradients."""
        n = len(y)
        if len(x) != n:
            raise ShapeError(f"labels must be {len(x)} integers (one per input), got {n}")
        total_loss, correct = 0.0, 0
        for lo in range(0, n, EVAL_BATCH):
            logits = self.forward(x[lo : lo + EVAL_BATCH], train=False)
            yb = y[lo : lo + EVAL_BATCH]
            self._check_labels(yb, len(logits))
            loss, _ = softmax_cross_entropy(logits, yb)
            total_loss += loss * len(yb)
            correct += int((logits.argmax(axis=1) == yb).sum())
        return total_loss / max(n, 1), correct / max(n, 1)

    def predict(self, x: Any) -> Any:
        """Class indices (on the model's device), in batches."""
        xp = self.backend.xp
        if len(x) == 0:
            return xp.zeros(0, dtype=np.int64)
        parts = [
            self.forward(x[lo : lo + EVAL_BATCH], train=False).argmax(axis=1)
            for lo in range(0, len(x), EVAL_BATCH)
        ]
        return parts[0] if len(parts) == 1 else xp.concatenate(parts)

    # --- input checks: cheap (shape and dtype only), so they stay on in the hot loop ---------

    def _input(self, x: Any) -> Any:
        shape = tuple(x.shape)
        if shape[1:] != self.input_shape:
            raise ShapeError(
                f"model takes inputs of shape (N, {', '.join(map(str, self.input_shape))}), "
                f"got {shape}"
            )
        if x.dtype != self.params.dtype or is_device_array(x) != self.backend.is_gpu:
            x = self.backend.asarray(x, dtype=self.params.dtype)
        return x

    def _check_labels(self, y: Any, n: int) -> None:
        if y.ndim != 1 or len(y) != n or y.dtype.kind not in "iu":
            raise ShapeError(
                f"labels must be {n} integers (one per input), got {y.dtype} of shape {y.shape}"
            )
        n_classes = self.output_shape[0]
        # On the host the range check costs ~2 us; on a device it would force a sync each step,
        # so device labels are trusted (swarmnode.node.train.data.datasets validates every label
        # set on load).
        if isinstance(y, np.ndarray) and n and (y.min() < 0 or y.max() >= n_classes):
            raise ShapeError(f"labels must be in [0, {n_classes}), got {y.min()}..{y.max()}")
