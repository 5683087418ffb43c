"""CUDA kernels (cupy ElementwiseKernel), each behind a function that checks its arguments.

cupy checks nothing about a raw kernel's arguments: a float64 array or a strided view would be
read as garbage. Every wrapper here checks dtype, contiguity, device and sizes first. The numpy
reference of each kernel lives beside its caller (`swarmnode.kernels.optim.sgd_reference`,
`adamw_reference`), computes in the same order with the same host-side scalars, and the gpu tests
(tests/kernels/test_gpu_parity.py) compare the two on random inputs.

cupy is imported inside the functions only, so this module imports on a machine without it.
"""

from __future__ import annotations

import functools
from typing import Any

from swarmnode.kernels.backend import is_device_array
from swarmnode.kernels.errors import ShapeError

# Scalars that depend only on hyper-parameters and the step (1 - beta, bias corrections) are
# computed on the host in float64, exactly as the numpy reference does, then passed in float32.
_SGD_SRC = """
    float v = momentum * velocity + grad;
    v = v + weight_decay * param;
    velocity = v;
    param = param - lr * v;
"""

_ADAMW_SRC = """
    float m1 = beta1 * m + one_minus_beta1 * grad;
    float v1 = beta2 * v + one_minus_beta2 * (grad * grad);
    m = m1;
    v = v1;
    float denom = sqrtf(v1 / bc2) + eps;
    param = param * decay - step_size * (m1 / denom);
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
        "float32 grad, float32 beta1, float32 one_minus_beta1, float32 beta2, "
        "float32 one_minus_beta2, float32 eps, float32 bc2, float32 decay, float32 step_size",
        "float32 param, float32 m, float32 v",
        _ADAMW_SRC,
        "swarmnode_adamw",
    )


def check_vectors(*arrays: Any) -> None:
    """All cupy, float32, 1-D, C-contiguous, on one device and of one size; else ShapeError."""
    first = arrays[0]
    for a in arrays:
        if not is_device_array(a):
            raise ShapeError(f"kernel needs cupy arrays, got {type(a).__name__}")
        if str(a.dtype) != "float32":
            raise ShapeError(f"kernel needs float32 arrays, got {a.dtype}")
        if a.ndim != 1 or not a.flags.c_contiguous:
            raise ShapeError(f"kernel needs 1-D C-contiguous arrays, got shape {a.shape}")
        if a.size != first.size:
            raise ShapeError(f"kernel arrays differ in size: {a.size} != {first.size}")
        if a.device.id != first.device.id:
            raise ShapeError(
                f"kernel arrays on different devices: {a.device.id}, {first.device.id}"
            )


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
    if t < 1:
        raise ShapeError(f"adamw step count must be >= 1, got {t}")
    bc2 = 1.0 - beta2**t
    decay = 1.0 - lr * wd
    step_size = lr / (1.0 - beta1**t)
    _adamw_kernel()(
        grad, beta1, 1.0 - beta1, beta2, 1.0 - beta2, eps, bc2, decay, step_size, param, m, v
    )
