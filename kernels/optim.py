"""Optimizers over the whole flat parameter vector: SGD with momentum, AdamW.

One update is one pass over the flat buffer: on cupy a single fused ElementwiseKernel
(kernels/cuda_kernels.py), on numpy the in-place reference below (which the gpu tests compare
against). No per-layer loops anywhere.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from kernels.backend import to_numpy
from kernels.errors import ShapeError, SwarmnodeError
from kernels.flat import FlatParams


class OptimizerError(SwarmnodeError, ValueError):
    """An unknown optimizer, a bad hyper-parameter, or an incompatible saved state."""


def _is_gpu(a: Any) -> bool:
    return type(a).__module__.split(".")[0] == "cupy"


class Optimizer:
    name = "base"

    def __init__(self, params: FlatParams, lr: float) -> None:
        if not lr > 0:
            raise OptimizerError(f"learning rate must be > 0, got {lr}")
        self.params = params
        self.lr = float(lr)
        self.t = 0

    def step(self) -> None:
        raise NotImplementedError

    def state_dict(self) -> dict[str, Any]:
        raise NotImplementedError

    def load_state_dict(self, state: dict[str, Any]) -> None:
        raise NotImplementedError

    def _load_vector(self, state: dict[str, Any], key: str, into: Any) -> None:
        if key not in state:
            raise OptimizerError(f"{self.name} state lacks {key!r}")
        v = np.asarray(state[key])
        if v.shape != (self.params.size,):
            raise ShapeError(
                f"{self.name} state {key!r} has shape {v.shape}, expected ({self.params.size},)"
            )
        into[...] = _like(into, v)


def _zeros_like(a: Any) -> Any:
    if _is_gpu(a):
        import cupy as cp

        return cp.zeros_like(a)
    return np.zeros_like(a)


def _like(target: Any, host: np.ndarray) -> Any:
    if _is_gpu(target):
        import cupy as cp

        return cp.asarray(host, dtype=target.dtype)
    return host.astype(target.dtype, copy=False)


class SGD(Optimizer):
    """v <- mu v + (g + wd x); x <- x - lr v (PyTorch's convention, L2-coupled weight decay)."""

    name = "sgd"

    def __init__(
        self, params: FlatParams, lr: float, momentum: float = 0.9, weight_decay: float = 0.0
    ) -> None:
        super().__init__(params, lr)
        if not 0 <= momentum < 1 or weight_decay < 0:
            raise OptimizerError(
                f"need 0 <= momentum < 1 and weight_decay >= 0, got {momentum}, {weight_decay}"
            )
        self.momentum, self.weight_decay = float(momentum), float(weight_decay)
        self.velocity = _zeros_like(params.data)

    def step(self) -> None:
        x, g, v = self.params.data, self.params.grad, self.velocity
        self.t += 1
        if _is_gpu(x) and x.dtype == np.float32:
            from kernels.cuda_kernels import sgd_step

            sgd_step(x, g, v, self.lr, self.momentum, self.weight_decay)
            return
        sgd_reference(x, g, v, self.lr, self.momentum, self.weight_decay)

    def state_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "t": self.t,
            "lr": self.lr,
            "velocity": to_numpy(self.velocity).copy(),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        _check_name(state, self.name)
        self._load_vector(state, "velocity", self.velocity)
        self.t = int(state.get("t", 0))


def sgd_reference(x: Any, g: Any, v: Any, lr: float, momentum: float, wd: float) -> None:
    """The numpy reference of the fused SGD kernel (in place)."""
    v *= momentum
    v += g
    if wd:
        v += wd * x
    x -= lr * v


class AdamW(Optimizer):
    """Adam with decoupled weight decay (Loshchilov & Hutter 2019), bias-corrected."""

    name = "adamw"

    def __init__(
        self,
        params: FlatParams,
        lr: float,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
        weight_decay: float = 0.01,
    ) -> None:
        super().__init__(params, lr)
        b1, b2 = betas
        if not (0 <= b1 < 1 and 0 <= b2 < 1 and eps > 0 and weight_decay >= 0):
            raise OptimizerError(
                f"bad AdamW hyper-parameters betas={betas} eps={eps} wd={weight_decay}"
            )
        self.beta1, self.beta2, self.eps, self.weight_decay = (
            float(b1),
            float(b2),
            float(eps),
            float(weight_decay),
        )
        self.m = _zeros_like(params.data)
        self.v = _zeros_like(params.data)

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
        if _is_gpu(x) and x.dtype == np.float32:
            from kernels.cuda_kernels import adamw_step

            adamw_step(x, g, self.m, self.v, **kw)
            return
        adamw_reference(x, g, self.m, self.v, **kw)

    def state_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "t": self.t,
            "lr": self.lr,
            "m": to_numpy(self.m).copy(),
            "v": to_numpy(self.v).copy(),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        _check_name(state, self.name)
        self._load_vector(state, "m", self.m)
        self._load_vector(state, "v", self.v)
        self.t = int(state.get("t", 0))


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
) -> None:
    """The numpy reference of the fused AdamW kernel (in place)."""
    xp = np if isinstance(x, np.ndarray) else __import__("cupy")
    m *= beta1
    m += (1 - beta1) * g
    v *= beta2
    v += (1 - beta2) * g * g
    mhat = m / (1 - beta1**t)
    vhat = v / (1 - beta2**t)
    x -= lr * (mhat / (xp.sqrt(vhat) + eps) + wd * x)


def _check_name(state: dict[str, Any], name: str) -> None:
    saved = state.get("name", name)
    if saved != name:
        raise OptimizerError(f"saved optimizer state is for {saved!r}, this run uses {name!r}")


OPTIMIZERS = {"sgd": SGD, "adamw": AdamW}


def make_optimizer(name: str, params: FlatParams, lr: float, **kw: Any) -> Optimizer:
    """`sgd` (momentum, weight_decay) or `adamw` (betas, eps, weight_decay)."""
    cls = OPTIMIZERS.get(name.lower())
    if cls is None:
        raise OptimizerError(f"unknown optimizer {name!r} (expected {', '.join(OPTIMIZERS)})")
    try:
        return cls(params, lr, **kw)
    except TypeError as exc:
        raise OptimizerError(f"{name}: {exc}") from None
