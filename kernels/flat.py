"""All of a model's parameters, and their gradients, as views into one contiguous vector.

The exchange sends `data` as one buffer, the optimizer updates it in one fused pass, aggregation
works on rows of an (n, d) matrix: none of them loop over layers. Views stay valid for the life of
the object, so the vectors are only ever written in place (`load`, `x[...] = ...`), never rebound.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
from swarmnode.kernels.backend import array_module, to_numpy
from swarmnode.kernels.errors import ShapeError

Spec = tuple[str, tuple[int, ...]]
_DTYPES = (np.dtype(np.float32), np.dtype(np.float64))  # float64 is for gradient checks


class FlatParams:
    """`data` and `grad`: 1-D vectors; `views[name]` / `grads[name]`: shaped views into them."""

    def __init__(self, specs: Sequence[Spec], xp: Any = np, dtype: Any = np.float32) -> None:
        self.dtype = np.dtype(dtype)
        if self.dtype not in _DTYPES:
            raise ShapeError(f"parameters must be float32 or float64, got {self.dtype}")
        self.shapes = _check_specs(specs)
        sizes = [math.prod(shape) for shape in self.shapes.values()]
        self.size = int(sum(sizes))
        self.xp = xp
        self.data = xp.zeros(self.size, dtype=self.dtype)
        self.grad = xp.zeros(self.size, dtype=self.dtype)
        self.views: dict[str, Any] = {}
        self.grads: dict[str, Any] = {}
        self.offsets: dict[str, tuple[int, int]] = {}
        offset = 0
        for (name, shape), n in zip(self.shapes.items(), sizes, strict=True):
            self.offsets[name] = (offset, offset + n)
            self.views[name] = self.data[offset : offset + n].reshape(shape)
            self.grads[name] = self.grad[offset : offset + n].reshape(shape)
            offset += n

    @classmethod
    def over(cls, data: Any, shapes: Sequence[tuple[int, ...]] | None = None) -> FlatParams:
        """A `FlatParams` over a 1-D vector someone else owns (a user's model: numpy, cupy, or a
        DLPack view of a torch buffer): `data` is used as it is, never copied or rebound, and
        `grad` is a new zeroed vector beside it. `shapes` (the tensors in buffer order, which
        the lowrank codec factors one by one) must cover `data` exactly; None: one vector."""
        if getattr(data, "ndim", None) != 1:
            raise ShapeError(
                f"parameters must be a 1-D vector, got shape {getattr(data, 'shape', '?')}"
            )
        size = int(data.shape[0])
        if shapes is None:
            shapes = [(size,)]
        specs = [(f"{i}", tuple(int(d) for d in s)) for i, s in enumerate(shapes)]
        total = sum(math.prod(s) for _, s in specs)
        if total != size:
            raise ShapeError(f"parameter shapes hold {total} values, the vector has {size}")
        self = cls.__new__(cls)
        self.dtype = np.dtype(data.dtype)
        if self.dtype not in _DTYPES:
            raise ShapeError(f"parameters must be float32 or float64, got {self.dtype}")
        self.shapes = _check_specs(specs)
        self.size = size
        self.xp = array_module(data)
        self.data = data
        self.grad = self.xp.zeros(size, dtype=self.dtype)
        self.views, self.grads, self.offsets = {}, {}, {}
        offset = 0
        for name, shape in self.shapes.items():
            n = math.prod(shape)
            self.offsets[name] = (offset, offset + n)
            self.views[name] = data[offset : offset + n].reshape(shape)
            self.grads[name] = self.grad[offset : offset + n].reshape(shape)
            offset += n
        return self

    def load(self, vector: Any) -> None:
        """Copy a flat host or device vector in, in place (the views stay valid)."""
        shape = tuple(getattr(vector, "shape", np.shape(vector)))
        if shape != (self.size,):
            raise ShapeError(f"expected a vector of {self.size} parameters, got shape {shape}")
        if self.xp is np:  # a cupy vector must be copied to the host explicitly
            vector = to_numpy(vector)
        self.data[...] = self.xp.asarray(vector, dtype=self.dtype)

    def zero_grad(self) -> None:
        self.grad[...] = 0


def _check_specs(specs: Sequence[Spec]) -> dict[str, tuple[int, ...]]:
    shapes: dict[str, tuple[int, ...]] = {}
    for name, shape in specs:
        if name in shapes:
            raise ShapeError(f"duplicate parameter name {name!r}")
        dims = tuple(int(s) for s in shape)
        if any(d < 0 for d in dims):
            raise ShapeError(f"parameter {name!r} has a negative dimension: {dims}")
        shapes[name] = dims
    return shapes
