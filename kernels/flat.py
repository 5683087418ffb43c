"""All of a model's parameters, and their gradients, as views into one contiguous vector.

The exchange sends `data` as one buffer, the optimizer updates it in one fused pass, aggregation
works on rows of an (n, d) matrix: none of them loop over layers.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from kernels.errors import ShapeError


class FlatParams:
    """`data` and `grad`: 1-D vectors; `views[name]` / `grads[name]`: shaped views into them."""

    def __init__(
        self, specs: Sequence[tuple[str, tuple[int, ...]]], xp: Any = np, dtype: Any = np.float32
    ) -> None:
        names = [name for name, _ in specs]
        if len(set(names)) != len(names):
            raise ShapeError(f"duplicate parameter names in {names}")
        self.shapes = {name: tuple(int(s) for s in shape) for name, shape in specs}
        sizes = [int(np.prod(shape)) for shape in self.shapes.values()]
        self.size = int(sum(sizes))
        self.dtype = np.dtype(dtype)
        self.data = xp.zeros(self.size, dtype=self.dtype)
        self.grad = xp.zeros(self.size, dtype=self.dtype)
        self.views: dict[str, Any] = {}
        self.grads: dict[str, Any] = {}
        offset = 0
        for (name, shape), n in zip(self.shapes.items(), sizes, strict=True):
            self.views[name] = self.data[offset : offset + n].reshape(shape)
            self.grads[name] = self.grad[offset : offset + n].reshape(shape)
            offset += n

    def load(self, vector: Any) -> None:
        """Copy a flat vector in, in place (the views stay valid)."""
        if tuple(vector.shape) != (self.size,):
            raise ShapeError(
                f"expected a vector of {self.size} parameters, got shape {vector.shape}"
            )
        self.data[...] = vector
