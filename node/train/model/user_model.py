"""`UserModel`: a user's `Model` (node/train/model/protocol.py) as the trainer's `TrainableModel`.

The user's `params` vector is used as it is (a DLPack tensor is viewed, not copied), so the
optimizer, the exchange, aggregation and checkpoints all work on the buffer the user's code
reads. Every answer of theirs is checked before it can reach that buffer: a gradient of the
wrong size, dtype or device, or one with NaN or Inf, and a method that raises, stop this peer
with one line naming their code; the parameters stay as they were before the step. A peer
whose model fails mid-run is treated as a diverged one (node/peer/node.py, `_fail`): it stops
serving its model and leaves, so the others are never handed what the failure left behind.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from swarmnode.kernels.backend import CPU, Backend, dlpack_module, is_device_array, to_numpy
from swarmnode.kernels.errors import ShapeError
from swarmnode.kernels.flat import FlatParams
from swarmnode.node.train.errors import DivergedError, UserCodeError
from swarmnode.node.train.user_code import call_user, site

CHECK_ROWS = 8  # the dry run at build time: a few samples, enough to catch a wrong shape


class UserModel:
    """The trainer's view of a user's model: `params` (a `FlatParams` over their vector),
    `backend`, `loss_and_grad`, `evaluate`; `name` is what messages call it."""

    def __init__(self, model: Any, name: str) -> None:
        self.user = model
        self.name = name
        self.divergence_hint = f"returned by {name}: a bug in the model, or try a smaller --lr"
        if not callable(getattr(model, "loss_and_grad", None)):
            raise UserCodeError(
                f"{name}: got {_kind(model)} {_short(model)}, which is not a model: it has no "
                "loss_and_grad(x, y) method (see swarmnode.Model)"
            )
        self._evaluate = getattr(model, "evaluate", None)
        self._predict = getattr(model, "predict", None)
        if not callable(self._evaluate) and not callable(self._predict):
            raise UserCodeError(f"{name} has neither evaluate(x, y) nor predict(x)")
        self._raw = getattr(model, "params", None)
        data = self._vector(self._raw, "params")
        if data.ndim != 1 or data.dtype != np.float32 or data.size == 0:
            raise UserCodeError(
                f"{name}.params must be a non-empty 1-D float32 vector, got "
                f"{data.dtype}{list(data.shape)}"
            )
        if not _writable_contiguous(data):
            raise UserCodeError(f"{name}.params must be one contiguous, writable buffer")
        if not _finite(data):
            raise UserCodeError(f"{name}.params holds NaN or Inf before any training")
        try:
            self.params = FlatParams.over(data, getattr(model, "shapes", None))
        except (ShapeError, TypeError, ValueError) as exc:
            raise UserCodeError(f"{name}.shapes does not describe params: {exc}") from None
        self.backend = _backend_of(data)

    @property
    def num_params(self) -> int:
        return int(self.params.size)

    # --- the trainer's calls -------------------------------------------------------------

    def loss_and_grad(self, x: Any, y: Any, logit_offset: Any = None) -> float:
        """The user's loss; their gradient, checked, copied into `params.grad`. `logit_offset`
        is ignored: a user model is not assumed to be a softmax classifier."""
        out = call_user(self.user.loss_and_grad, f"{self.name}: loss_and_grad", x, y)
        if not isinstance(out, tuple | list) or len(out) != 2:
            raise self._wrong("loss_and_grad", f"must return (loss, grad), got {_kind(out)}")
        loss = self._number(out[0], "loss_and_grad's loss")
        self._check_params_kept()
        grad = self._vector(out[1], "loss_and_grad's gradient")
        if tuple(grad.shape) != (self.params.size,) or grad.dtype.kind != "f":
            raise self._wrong(
                "loss_and_grad",
                f"returned a gradient of {grad.dtype}{list(grad.shape)}; it must be "
                f"{self.params.size} floats, one per entry of params, in the same order",
            )
        self._copy_grad(grad)
        if math.isfinite(loss) and not _finite(self.params.grad):
            raise DivergedError(
                f"training diverged: {self.name}'s loss_and_grad returned a gradient with NaN "
                f"or Inf (loss {loss:.4g}); the parameters are left as they were (a bug in the "
                "model, or try a smaller --lr)"
            )
        return loss

    def evaluate(self, x: Any, y: Any) -> tuple[float, float]:
        """(loss, accuracy) from the user's `evaluate`, or the accuracy of their `predict`."""
        if callable(self._evaluate):
            out = call_user(self._evaluate, f"{self.name}: evaluate", x, y)
            if isinstance(out, tuple | list) and len(out) == 2:
                return self._number(out[0], "evaluate's loss"), self._number(
                    out[1], "evaluate's accuracy"
                )
            return self._number(out, "evaluate's loss"), float("nan")
        pred = self._vector(call_user(self._predict, f"{self.name}: predict", x), "predict")
        pred_h, y_h = to_numpy(pred), to_numpy(y)
        if pred_h.shape != y_h.shape:
            raise self._wrong("predict", f"returned shape {pred_h.shape} for {len(y_h)} samples")
        return float("nan"), float(np.mean(pred_h == y_h)) if len(y_h) else float("nan")

    def check(self, x: Any, y: Any, x_test: Any, y_test: Any) -> None:
        """A dry run on a few samples of each split, before the peer serves or joins: a model
        that does not fit the data fails here, with its message, not after it joined."""
        n, m = min(CHECK_ROWS, len(y)), min(CHECK_ROWS, len(y_test))
        loss = self.loss_and_grad(self._rows(x, n), self.backend.asarray(y[:n]))
        if not math.isfinite(loss):
            raise self._wrong(
                "loss_and_grad", f"returned a loss of {loss} on the first {n} samples"
            )
        if m:
            self.evaluate(self._rows(x_test, m), self.backend.asarray(y_test[:m]))
        self.params.grad[...] = 0

    def _rows(self, x: Any, n: int) -> Any:
        # what the trainer hands over: float32 on the model's device (streamed or not)
        return self.backend.asarray(np.ascontiguousarray(x[:n], dtype=np.float32))

    # --- checks --------------------------------------------------------------------------

    def _wrong(self, method: str, what: str) -> UserCodeError:
        """A wrong answer of the user's `method`, naming where it is defined."""
        where = site(getattr(self.user, method, None))
        return UserCodeError(f"{self.name}: {method} {what}" + (f" ({where})" if where else ""))

    def _check_params_kept(self) -> None:
        # A model that rebinds params (self.params = self.params - lr * g) would train a vector
        # the swarm never sees; checked for numpy and cupy (a DLPack object may be re-made).
        now = getattr(self.user, "params", None)
        if now is self._raw or not (isinstance(now, np.ndarray) or is_device_array(now)):
            return
        if _pointer(now) != _pointer(self.params.data):
            raise UserCodeError(
                f"{self.name} rebound its params: the swarm trains and exchanges the vector it "
                "had at the start; change it in place (params[...] = ...) or not at all"
            )

    def _vector(self, value: Any, what: str) -> Any:
        """A numpy or cupy array of `value`: as it is, or a DLPack view (no copy)."""
        if isinstance(value, np.ndarray) or is_device_array(value):
            return value
        device = getattr(value, "__dlpack_device__", None)
        if device is None:
            raise UserCodeError(
                f"{self.name}: {what} is a {_kind(value)}, not an array (numpy, cupy, or a "
                "tensor with __dlpack__)"
            )
        kind = call_user(device, f"{self.name}: {what}.__dlpack_device__")[0]
        module = dlpack_module(kind)
        if module is None:
            raise UserCodeError(f"{self.name}: {what} lives on DLPack device type {kind}")
        return call_user(module.from_dlpack, f"{self.name}: {what} through DLPack", value)

    def _number(self, value: Any, what: str) -> float:
        try:
            return float(value)
        except (TypeError, ValueError):
            method, _, part = what.partition("'s ")
            raise self._wrong(
                method, f"returned a {part} that is not a number: {_kind(value)}"
            ) from None

    def _copy_grad(self, grad: Any) -> None:
        target = self.params.grad
        if is_device_array(grad) != is_device_array(target):
            grad = to_numpy(grad) if not is_device_array(target) else self.backend.asarray(grad)
        target[...] = grad  # casts a float64 gradient to float32


def _backend_of(data: Any) -> Backend:
    if not is_device_array(data):
        return CPU
    import cupy

    return Backend("cupy", cupy, int(data.device.id))


def _finite(v: Any) -> bool:
    # One BLAS pass and no temporary: v.v is finite iff every entry is (or its norm overflows
    # float32, past 1e19: divergence all the same).
    return math.isfinite(float(v.dot(v)))


def _writable_contiguous(a: Any) -> bool:
    flags = a.flags
    return bool(flags["C_CONTIGUOUS"]) and bool(getattr(flags, "writeable", True))


def _pointer(a: Any) -> int:
    if isinstance(a, np.ndarray):
        return int(a.__array_interface__["data"][0])
    return int(a.data.ptr)


def _short(value: Any) -> str:
    text = repr(value)
    return f"({text[:40]}...)" if len(text) > 40 else f"({text})"


def _kind(value: Any) -> str:
    shape = getattr(value, "shape", None)
    return f"{type(value).__name__}{list(shape) if shape is not None else ''}"
