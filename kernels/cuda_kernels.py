"""CUDA kernels (cupy ElementwiseKernel), each behind a function that checks its arguments.

cupy checks nothing about a raw kernel's arguments: a float64 array or a strided view would be
read as garbage. Every wrapper here checks dtype, contiguity and sizes first. The numpy
reference of each kernel lives beside its caller (kernels/optim.py) and the gpu tests compare
the two on random inputs.
"""

from __future__ import annotations

import functools
from typing import Any

from kernels.errors import ShapeError

_SGD_SRC = """
    float g = grad + weight_decay * param;
    float v = momentum * velocity + g;
    velocity = v;
    param = param - lr * v;
"""

_ADAMW_SRC = """
    float m1 = beta1 * m + (1.0f - beta1) * grad;
    float v1 = beta2 * v + (1.0f - beta2) * grad * grad;
    m = m1;
    v = v1;
    float mhat = m1 / bc1;
    float vhat = v1 / bc2;
    param = param - lr * (mhat / (sqrtf(vhat) + eps) + weight_decay * param);
"""


@functools.cache
def _sgd_kernel() -> Any:
    import cupy as cp

    return cp.ElementwiseKernel(
        "float32 grad, float32 lr, float32 momentum, float32 weight_decay",
        "float32 param, float32 velocity",
        _SGD_SRC,
        "swarmnode_sgd_momentum",
    )


@functools.cache
def _adamw_kernel() -> Any:
    import cupy as cp

    return cp.ElementwiseKernel(
        "float32 grad, float32 lr, float32 beta1, float32 beta2, float32 eps, "
        "float32 weight_decay, float32 bc1, float32 bc2",
        "float32 param, float32 m, float32 v",
        _ADAMW_SRC,
        "swarmnode_adamw",
    )


def check_vectors(*arrays: Any) -> None:
    """All float32, 1-D, C-contiguous and of one size; raise ShapeError otherwise."""
    size = arrays[0].size
    for a in arrays:
        if str(a.dtype) != "float32":
            raise ShapeError(f"kernel needs float32 arrays, got {a.dtype}")
        if a.ndim != 1 or not a.flags.c_contiguous:
            raise ShapeError("kernel needs 1-D C-contiguous arrays")
        if a.size != size:
            raise ShapeError(f"kernel arrays differ in size: {a.size} != {size}")


def sgd_step(param: Any, grad: Any, velocity: Any, lr: float, momentum: float, wd: float) -> None:
    """One fused SGD-momentum update, in place on `param` and `velocity`."""
    check_vectors(param, grad, velocity)
    _sgd_kernel()(grad, lr, momentum, wd, param, velocity)


def adamw_step(
    param: Any,
    grad: Any,
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
    """One fused AdamW update (bias-corrected, decoupled weight decay), in place."""
    check_vectors(param, grad, m, v)
    bc1, bc2 = 1.0 - beta1**t, 1.0 - beta2**t
    _adamw_kernel()(grad, lr, beta1, beta2, eps, wd, bc1, bc2, param, m, v)
