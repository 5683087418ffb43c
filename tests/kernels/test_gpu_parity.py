"""cupy vs numpy: forward, backward and both optimizer steps (skipped without a GPU)."""

from __future__ import annotations

import numpy as np
import pytest

pytestmark = [pytest.mark.gpu, pytest.mark.timeout(120)]

SPECS = ["mlp:64,32", "mlp:32/gelu", "cnn1d:8k5,p2,16k3,p2,32"]


def _models(spec):
    from kernels.backend import CPU, select_backend
    from node.models import build_model

    gpu = select_backend("cuda")
    return (
        build_model(spec, (8, 8), 10, CPU, seed=1),
        build_model(spec, (8, 8), 10, gpu, seed=1),
        gpu,
    )


@pytest.mark.parametrize("spec", SPECS)
def test_forward_backward_match(spec):
    cpu, gpu, backend = _models(spec)
    np.testing.assert_array_equal(cpu.params.data, gpu.params.data.get())
    rng = np.random.default_rng(0)
    x = rng.random((64, 8, 8), dtype=np.float32)
    y = rng.integers(0, 10, 64)
    loss_c = cpu.loss_and_grad(x, y)
    loss_g = gpu.loss_and_grad(backend.asarray(x), backend.asarray(y))
    assert abs(loss_c - loss_g) < 1e-5 * max(1.0, abs(loss_c))
    np.testing.assert_allclose(gpu.params.grad.get(), cpu.params.grad, rtol=1e-4, atol=1e-6)


@pytest.mark.parametrize("name", ["sgd", "adamw"])
def test_fused_optimizer_matches_numpy_reference(name):
    import cupy as cp

    from kernels.flat import FlatParams
    from kernels.optim import make_optimizer

    rng = np.random.default_rng(1)
    n = 1_000_003
    x0, g = rng.standard_normal(n).astype(np.float32), rng.standard_normal(n).astype(np.float32)
    pc, pg = FlatParams([("w", (n,))]), FlatParams([("w", (n,))], cp)
    pc.data[...] = x0
    pg.data[...] = cp.asarray(x0)
    kw = {"weight_decay": 0.01} | ({"momentum": 0.9} if name == "sgd" else {})
    oc, og = make_optimizer(name, pc, 1e-2, **kw), make_optimizer(name, pg, 1e-2, **kw)
    for _ in range(3):
        pc.grad[...] = g
        pg.grad[...] = cp.asarray(g)
        oc.step()
        og.step()
    np.testing.assert_allclose(pg.data.get(), pc.data, rtol=1e-5, atol=1e-6)


def test_kernel_wrappers_refuse_bad_arrays():
    import cupy as cp

    from kernels.cuda_kernels import sgd_step
    from kernels.errors import ShapeError

    good = cp.zeros(8, cp.float32)
    with pytest.raises(ShapeError):
        sgd_step(cp.zeros(8, cp.float64), good, good, 0.1, 0.9, 0.0)
    with pytest.raises(ShapeError):
        sgd_step(cp.zeros(16, cp.float32)[::2], good, good, 0.1, 0.9, 0.0)
    with pytest.raises(ShapeError):
        sgd_step(cp.zeros(9, cp.float32), good, good, 0.1, 0.9, 0.0)
