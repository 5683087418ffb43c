"""`Sequential`: layers whose parameters are views into one `FlatParams` buffer."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from kernels.backend import CPU, Backend
from kernels.flat import FlatParams
from kernels.layers import Layer, softmax_cross_entropy

EVAL_BATCH = 4096


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
        self.input_shape = tuple(input_shape)
        specs, shape = [], self.input_shape
        per_layer: list[list[tuple[str, tuple[int, ...]]]] = []
        for i, layer in enumerate(self.layers):
            mine = [(f"{i}.{name}", s) for name, s in layer.param_specs(shape)]
            per_layer.append(mine)
            specs += mine
            shape = layer.out_shape(shape)
        self.output_shape = shape
        self.params = FlatParams(specs, backend.xp, dtype)
        self._init(per_layer, seed)

    def _init(self, per_layer: list[list[tuple[str, tuple[int, ...]]]], seed: int) -> None:
        # Initialise on the host from one seeded stream, then copy: CPU and GPU start identical.
        host = FlatParams([s for layer in per_layer for s in layer], np, self.params.dtype)
        rng = np.random.default_rng(seed)
        for layer, specs in zip(self.layers, per_layer, strict=True):
            layer.init({n.split(".", 1)[1]: host.views[n] for n, _ in specs}, rng)
            layer.bind(
                {n.split(".", 1)[1]: self.params.views[n] for n, _ in specs},
                {n.split(".", 1)[1]: self.params.grads[n] for n, _ in specs},
            )
        self.params.data[...] = self.backend.asarray(host.data)

    @property
    def num_params(self) -> int:
        return self.params.size

    def forward(self, x: Any, train: bool = True) -> Any:
        for layer in self.layers:
            x = layer.forward(x)
        return x

    def backward(self, dlogits: Any) -> Any:
        for layer in reversed(self.layers):
            dlogits = layer.backward(dlogits)
        return dlogits

    def loss_and_grad(self, x: Any, y: Any) -> float:
        """Mean batch loss; overwrites `params.grad` with its gradient."""
        loss, dlogits = softmax_cross_entropy(self.forward(x), y)
        self.backward(dlogits)
        return loss

    def evaluate(self, x: Any, y: Any) -> tuple[float, float]:
        """(mean loss, accuracy) over (x, y), in batches, without touching gradients."""
        n = len(y)
        total_loss, correct = 0.0, 0
        for lo in range(0, n, EVAL_BATCH):
            logits = self.forward(x[lo : lo + EVAL_BATCH], train=False)
            yb = y[lo : lo + EVAL_BATCH]
            loss, _ = softmax_cross_entropy(logits, yb)
            total_loss += loss * len(yb)
            correct += int((logits.argmax(axis=1) == yb).sum())
        return total_loss / max(n, 1), correct / max(n, 1)

    def predict(self, x: Any) -> Any:
        return self.forward(x, train=False).argmax(axis=1)
