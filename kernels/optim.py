"""Optimizers over the whole flat parameter vector: SGD with momentum, AdamW.

One update is one pass over the flat buffer: on cupy a single fused ElementwiseKernel
(kernels/cuda_kernels.py), on numpy the in-place reference below (which the gpu tests compare
against). No per-layer loops anywhere. The numpy references work through one scratch vector with
`out=` ufuncs, so a step allocates nothing.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from swarmnode.kernels.backend import array_module, is_device_array, to_numpy
from swarmnode.kernels.errors import ShapeError, SwarmnodeError
from swarmnode.kernels.flat import FlatParams


class OptimizerError(SwarmnodeError, ValueError):
    """An unknown optimizer, a bad hyper-parameter, or an incompatible saved state."""


def _fused(x: Any) -> bool:
    """The cupy kernels are float32-only; float64 device buffers take the (cupy) reference."""
    return is_device_array(x) and x.dtype == np.float32


class Optimizer:
    """Updates `params.data` in place from `params.grad`; `t` counts the steps taken."""

    name = "base"
    _slots: tuple[str, ...] = ()  # the per-parameter state vectors, saved by state_dict

    def __init__(self, params: FlatParams, lr: float) -> None:
        self.params = params
        self.lr = lr
        self.t = 0
        self._scratch: Any = None

    @property
    def lr(self) -> float:
        return self._lr

    @lr.setter
    def lr(self, value: float) -> None:
        # A NaN or negative rate would silently wreck every parameter on the next step.
        if not isinstance(value, (int, float, np.floating, np.integer)) or not (
            math.isfinite(value) and value > 0
        ):
            raise OptimizerError(f"learning rate must be a finite number > 0, got {value!r}")
        self._lr = float(value)

    def step(self) -> None:
        raise NotImplementedError

    def forget_heading(self) -> None:
        """Drop the state that says where the steps were going (a momentum), keep the scale:
        after the parameters were put back to where they were before a rolled-back mix, a
        heading built on the mixed model would carry them the way the mix did. No state here."""

    def scratch(self) -> Any:
        if self._scratch is None:
            self._scratch = array_module(self.params.data).empty_like(self.params.data)
        return self._scratch

    def state_dict(self) -> dict[str, Any]:
        """Host numpy copies of the state vectors plus the name, step count and rate."""
        state: dict[str, Any] = {"name": self.name, "t": self.t, "lr": self.lr}
        for slot in self._slots:
            state[slot] = to_numpy(getattr(self, slot)).copy()
        return state

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore `state_dict()` output. Everything is validated before anything is written,
        so a rejected state leaves the optimizer as it was. The learning rate is *not*
        restored: the one this run was started with wins (a resume may change --lr)."""
        if not isinstance(state, dict):
            raise OptimizerError(f"{self.name} state must be a dict, got {type(state).__name__}")
        saved = state.get("name", self.name)
        if saved != self.name:
            raise OptimizerError(
                f"saved optimizer state is for {saved!r}, this run uses {self.name!r}"
            )
        t = state.get("t", 0)
        if isinstance(t, bool) or not isinstance(t, (int, np.integer)) or t < 0:
            raise OptimizerError(f"{self.name} state 't' must be an int >= 0, got {t!r}")
        vectors = {slot: self._checked_vector(state, slot) for slot in self._slots}
        for slot, host in vectors.items():
            target = getattr(self, slot)
            target[...] = array_module(target).asarray(host, dtype=target.dtype)
        self.t = int(t)

    def _checked_vector(self, state: dict[str, Any], key: str) -> np.ndarray:
        if key not in state:
            raise OptimizerError(f"{self.name} state lacks {key!r}")
        v = np.asarray(state[key])
        if v.shape != (self.params.size,):
            raise ShapeError(
                f"{self.name} state {key!r} has shape {v.shape}, expected ({self.params.size},)"
            )
        if v.dtype.kind != "f" or not np.isfinite(v).all():
            raise OptimizerError(f"{self.name} state {key!r} must be finite floats")
        return v


class SGD(Optimizer):
    """v <- mu v + (g + wd x); x <- x - lr v (PyTorch's convention, L2-coupled weight decay)."""

    name = "sgd"
    _slots = ("velocity",)

    def __init__(
        self, params: FlatParams, lr: float, momentum: float = 0.9, weight_decay: float = 0.0
    ) -> None:
        super().__init__(params, lr)
        if not (0 <= momentum < 1 and 0 <= weight_decay < math.inf):
            raise OptimizerError(
                f"need 0 <= momentum < 1 and weight_decay >= 0, got {momentum}, {weight_decay}"
            )
        self.momentum, self.weight_decay = float(momentum), float(weight_decay)
        self.velocity = array_module(params.data).zeros_like(params.data)

    def step(self) -> None:
        x, g, v = self.params.data, self.params.grad, self.velocity
        self.t += 1
        if _fused(x):
            from swarmnode.kernels.cuda_kernels import sgd_step

            sgd_step(x, g, v, self.lr, self.momentum, self.weight_decay)
            return
        sgd_reference(x, g, v, self.lr, self.momentum, self.weight_decay, scratch=self.scratch())

    def forget_heading(self) -> None:
        self.velocity[...] = 0


def sgd_reference(
    x: Any, g: Any, v: Any, lr: float, momentum: float, wd: float, *, scratch: Any = None
) -> None:
    """The reference of the fused SGD kernel, in place on `x` and `v` (numpy or cupy)."""
    xp = array_module(x)
    s = xp.empty_like(x) if scratch is None else scratch
    v *= momentum
    v += g
    if wd:
        xp.multiply(x, wd, out=s)
        v += s
    xp.multiply(v, lr, out=s)
    x -= s


class AdamW(Optimizer):
    """Adam with decoupled weight decay (Loshchilov & Hutter 2019), bias-corrected.

    x <- x - lr * (m_hat / (sqrt(v_hat) + eps) + wd * x), as PyTorch's AdamW.
    """

    name = "adamw"
    _slots = ("m", "v")

    def __init__(
        self,
        params: FlatParams,
        lr: float,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
        weight_decay: float = 0.01,
    ) -> None:
        super().__init__(params, lr)
        try:
            b1, b2 = (float(b) for b in betas)
        except (TypeError, ValueError):
            raise OptimizerError(f"betas must be two numbers, got {betas!r}") from None
        if not (
            0 <= b1 < 1 and 0 <= b2 < 1 and 0 < eps < math.inf and 0 <= weight_decay < math.inf
        ):
            raise OptimizerError(
                f"bad AdamW hyper-parameters betas={betas} eps={eps} weight_decay={weight_decay}"
            )
        self.beta1, self.beta2 = b1, b2
        self.eps, self.weight_decay = float(eps), float(weight_decay)
        xp = array_module(params.data)
        self.m = xp.zeros_like(params.data)
        self.v = xp.zeros_like(params.data)

    def step(self) -> None:
        self.t += 1
        x, g = self.params.data, self.params.grad
        kw = dict(
            lr=self.lr,
            beta1=self.beta1,
            beta2=self.beta2,
            eps=self.eps,
            wd=self.weight_decay,
            t=self.t,
        )
        if _fused(x):
            from swarmnode.kernels.cuda_kernels import adamw_step

            adamw_step(x, g, self.m, self.v, **kw)
            return
        adamw_reference(x, g, self.m, self.v, **kw, scratch=self.scratch())

    def forget_heading(self) -> None:
        # the first moment is the heading; the second, each coordinate's scale, stays (its
        # gradients' size did not change with the mix), so the steps after ramp up from 1 - beta1
        self.m[...] = 0


def adamw_reference(
    x: Any,
    g: Any,
    m: Any,
    v: Any,
    *,
    lr: float,
    beta1: float,
    beta2: float,
    eps: float,
    wd: float,
    t: int,
    scratch: Any = None,
) -> None:
    """The reference of the fused AdamW kernel, in place on `x`, `m`, `v` (numpy or cupy)."""
    xp = array_module(x)
    s = xp.empty_like(x) if scratch is None else scratch
    # decoupled decay uses the parameters from before this step, like the kernel
    if wd:
        x *= 1.0 - lr * wd
    m *= beta1
    xp.multiply(g, 1.0 - beta1, out=s)
    m += s
    v *= beta2
    xp.multiply(g, g, out=s)
    s *= 1.0 - beta2
    v += s
    # s <- lr * m_hat / (sqrt(v_hat) + eps)
    xp.divide(v, 1.0 - beta2**t, out=s)
    xp.sqrt(s, out=s)
    s += eps
    xp.divide(m, s, out=s)
    s *= lr / (1.0 - beta1**t)
    x -= s


OPTIMIZERS: dict[str, type[Optimizer]] = {"sgd": SGD, "adamw": AdamW}


def make_optimizer(name: str, params: FlatParams, lr: float, **kw: Any) -> Optimizer:
    """`sgd` (momentum, weight_decay) or `adamw` (betas, eps, weight_decay)."""
    cls = OPTIMIZERS.get(str(name).lower())
    if cls is None:
        raise OptimizerError(f"unknown optimizer {name!r} (expected {', '.join(OPTIMIZERS)})")
    try:
        return cls(params, lr, **kw)
    except TypeError as exc:  # an unknown keyword, e.g. momentum= for adamw
        raise OptimizerError(f"{name}: {exc}") from None
