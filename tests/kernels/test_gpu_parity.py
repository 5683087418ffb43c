"""cupy vs numpy on random inputs: every op's forward and backward, whole models, both optimizer
steps (the fused kernels against the numpy reference), the kernel wrappers' checks.

Marked gpu: tests/conftest.py skips them without cupy or a device. cupy is imported inside the
tests only, so this module collects on a machine without it.
"""

from __future__ import annotations

import numpy as np
import pytest
from swarmnode.kernels.backend import CPU
from swarmnode.kernels.layers import (
    GELU,
    AddChannel,
    Conv1d,
    Conv2d,
    Flatten,
    Linear,
    MaxPool1d,
    MaxPool2d,
    ReLU,
    Reshape,
    Tanh,
)
from swarmnode.kernels.model import Sequential

pytestmark = [pytest.mark.gpu, pytest.mark.timeout(120)]

SPECS = [
    "linear",
    "mlp:64,32",
    "mlp:32/gelu",
    "mlp:16/tanh",
    "cnn1d:8k5,p2,16k3,p2,32",
    "cnn2d:8k3,p2,16k3,p2,32",
    "cnn2d:4x16,4k5,p3/tanh",
]

LAYER_STACKS = {
    "linear": (lambda: [Linear(7)], (5,)),
    "relu": (lambda: [Linear(6), ReLU()], (5,)),
    "tanh": (lambda: [Tanh()], (9,)),
    "gelu": (lambda: [GELU()], (9,)),
    "flatten": (lambda: [Flatten(), Linear(3)], (3, 4)),
    "conv_k1": (lambda: [Conv1d(4, 1)], (3, 10)),
    "conv_k5": (lambda: [Conv1d(4, 5)], (3, 10)),
    "maxpool": (lambda: [MaxPool1d(3)], (3, 10)),
    "maxpool2": (lambda: [MaxPool1d(2)], (3, 11)),
    "conv_relu_pool": (lambda: [Conv1d(4, 3), ReLU(), MaxPool1d(2)], (3, 10)),
    "stack": (
        lambda: [AddChannel(), Conv1d(4, 3), ReLU(), MaxPool1d(2), Flatten(), Linear(5)],
        (12,),
    ),
    # conv2d runs the same im2col (as_strided view + one copy) and GEMMs on cupy as on numpy
    "conv2d_k1": (lambda: [Conv2d(4, 1)], (5, 6, 3)),
    "conv2d_k3": (lambda: [Conv2d(4, 3)], (5, 6, 3)),
    "conv2d_k5": (lambda: [Conv2d(3, 5)], (4, 7, 2)),
    "maxpool2d": (lambda: [MaxPool2d(2)], (6, 6, 3)),
    "maxpool2d_3": (lambda: [MaxPool2d(3)], (7, 8, 2)),
    "conv2d_stack": (
        lambda: [
            Reshape((6, 6, 1)),
            Conv2d(4, 3),
            ReLU(),
            MaxPool2d(2),
            Conv2d(3, 3),
            Flatten(),
            Linear(5),
        ],
        (36,),
    ),
}


def gpu():
    from swarmnode.kernels.backend import select_backend

    return select_backend("cuda")


def close(got_device, want_host, rtol):
    """Relative to the largest magnitude: tight, yet fair to float32 sums in another order."""
    got = got_device.get()
    scale = max(float(np.abs(want_host).max()), 1e-30)
    np.testing.assert_allclose(got, want_host, rtol=rtol, atol=rtol * scale)


def test_cuda_backend_describes_its_device():
    backend = gpu()
    assert backend.name == "cupy" and backend.device_id == 0
    assert backend.describe().startswith("cuda:0 (")


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name", list(LAYER_STACKS))
def test_each_op_forward_and_backward_match(name, dtype):
    make, shape = LAYER_STACKS[name]
    backend = gpu()
    cpu_model = Sequential(make(), shape, backend=CPU, seed=3, dtype=dtype)
    gpu_model = Sequential(make(), shape, backend=backend, seed=3, dtype=dtype)
    np.testing.assert_array_equal(gpu_model.params.data.get(), cpu_model.params.data)
    rng = np.random.default_rng(0)
    x = rng.standard_normal((16, *shape)).astype(dtype)
    out_c = cpu_model.forward(x)
    out_g = gpu_model.forward(backend.asarray(x))
    rtol = 1e-5 if dtype == np.float32 else 1e-12
    close(out_g, out_c, rtol)
    dy = rng.standard_normal(out_c.shape).astype(dtype)
    dx_c = cpu_model.backward(dy)
    dx_g = gpu_model.backward(backend.asarray(dy))
    close(dx_g, dx_c, rtol)
    if cpu_model.params.size:
        close(gpu_model.params.grad, cpu_model.params.grad, rtol)


@pytest.mark.parametrize("spec", SPECS)
def test_models_loss_grad_evaluate_predict_match(spec):
    from swarmnode.node.train.model.builtin import build_model

    backend = gpu()
    cpu_model = build_model(spec, (8, 8), 10, CPU, seed=1)
    gpu_model = build_model(spec, (8, 8), 10, backend, seed=1)
    np.testing.assert_array_equal(gpu_model.params.data.get(), cpu_model.params.data)
    rng = np.random.default_rng(0)
    x = rng.random((64, 8, 8), dtype=np.float32)
    y = rng.integers(0, 10, 64)
    loss_c = cpu_model.loss_and_grad(x, y)
    loss_g = gpu_model.loss_and_grad(backend.asarray(x), backend.asarray(y))
    assert abs(loss_c - loss_g) < 1e-5 * max(1.0, abs(loss_c))
    close(gpu_model.params.grad, cpu_model.params.grad, 1e-5)
    # the logit-adjusted loss (node/train/data/label_prior.py): the offset lives on the device
    off = np.linspace(-2.0, 1.0, 10, dtype=np.float32)
    loss_c = cpu_model.loss_and_grad(x, y, off)
    loss_g = gpu_model.loss_and_grad(backend.asarray(x), backend.asarray(y), backend.asarray(off))
    assert abs(loss_c - loss_g) < 1e-5 * max(1.0, abs(loss_c))
    close(gpu_model.params.grad, cpu_model.params.grad, 1e-5)
    ev_c = cpu_model.evaluate(x, y)
    ev_g = gpu_model.evaluate(backend.asarray(x), backend.asarray(y))
    assert ev_g[0] == pytest.approx(ev_c[0], rel=1e-5)
    # host inputs are accepted too (copied to the device); compare where the top two logits
    # are not within rounding of each other
    top2 = np.sort(cpu_model.forward(x, train=False), axis=1)[:, -2:]
    clear = (top2[:, 1] - top2[:, 0]) > 1e-4
    pred_g, pred_c = gpu_model.predict(x).get(), cpu_model.predict(x)
    np.testing.assert_array_equal(pred_g[clear], pred_c[clear])


def test_softmax_cross_entropy_matches():
    from swarmnode.kernels.layers import softmax_cross_entropy

    backend = gpu()
    rng = np.random.default_rng(2)
    logits = (rng.standard_normal((32, 10)) * 20).astype(np.float32)
    y = rng.integers(0, 10, 32)
    loss_c, grad_c = softmax_cross_entropy(logits, y)
    loss_g, grad_g = softmax_cross_entropy(backend.asarray(logits), backend.asarray(y))
    assert loss_g == pytest.approx(loss_c, rel=1e-5)
    close(grad_g, grad_c, 1e-5)


def _run_optimizer(name, xp, x0, grads, dtype, kw):
    from swarmnode.kernels.flat import FlatParams
    from swarmnode.kernels.optim import make_optimizer

    p = FlatParams([("a", (7,)), ("w", (x0.size - 7,))], xp, dtype)
    p.load(x0)
    opt = make_optimizer(name, p, 1e-2, **kw)
    for g in grads:
        p.grad[...] = xp.asarray(g, dtype=dtype)
        opt.step()
    return p, opt


OPT_KW = {
    "sgd": {"momentum": 0.9, "weight_decay": 0.01},
    "adamw": {"weight_decay": 0.05, "betas": (0.8, 0.99)},
}


def _count_fused_launches(monkeypatch, name):
    """Count launches of the fused kernel and forbid the reference: the comparison below must
    be kernel vs reference, not reference vs reference (a dispatch bug would pass silently)."""
    import swarmnode.kernels.cuda_kernels as ck
    import swarmnode.kernels.optim as optim

    launches = []
    real_kernel = getattr(ck, f"_{name}_kernel")()

    def counting_kernel(*args):
        launches.append(args[-1].size)
        return real_kernel(*args)

    def reference_must_not_run(*args, **kw):
        raise AssertionError(f"float32 cupy {name} fell back to the reference implementation")

    monkeypatch.setattr(ck, f"_{name}_kernel", lambda: counting_kernel)
    monkeypatch.setattr(optim, f"{name}_reference", reference_must_not_run)
    return launches


@pytest.mark.parametrize("name", ["sgd", "adamw"])
def test_fused_optimizer_kernel_matches_numpy_reference(name, monkeypatch):
    import cupy as cp

    rng = np.random.default_rng(1)
    n = 1_000_003  # odd size: no kernel may assume a multiple of the block size
    x0 = rng.standard_normal(n).astype(np.float32)
    grads = [rng.standard_normal(n).astype(np.float32) for _ in range(5)]
    pc, oc = _run_optimizer(name, np, x0, grads, np.float32, OPT_KW[name])
    launches = _count_fused_launches(monkeypatch, name)  # after the numpy run: it is the reference
    pg, og = _run_optimizer(name, cp, x0, grads, np.float32, OPT_KW[name])
    assert launches == [n] * len(grads)  # one fused launch per step over the whole vector
    # same formula, same host-side scalars: only FMA contraction and rounding order differ
    np.testing.assert_allclose(pg.data.get(), pc.data, rtol=1e-5, atol=1e-6)
    for slot in oc._slots:
        np.testing.assert_allclose(getattr(og, slot).get(), getattr(oc, slot), rtol=1e-5, atol=1e-7)
    assert og.t == oc.t == 5


@pytest.mark.parametrize("name", ["sgd", "adamw"])
def test_float64_device_path_matches_numpy(name):
    import cupy as cp

    rng = np.random.default_rng(2)
    x0 = rng.standard_normal(1001)
    grads = [rng.standard_normal(1001) for _ in range(4)]
    pc, _ = _run_optimizer(name, np, x0, grads, np.float64, OPT_KW[name])
    pg, _ = _run_optimizer(name, cp, x0, grads, np.float64, OPT_KW[name])
    np.testing.assert_allclose(pg.data.get(), pc.data, rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("name", ["sgd", "adamw"])
def test_state_moves_between_host_and_device(name):
    """A checkpoint written on a CPU peer resumes on a GPU peer (and the state is host numpy)."""
    import cupy as cp

    rng = np.random.default_rng(3)
    x0 = rng.standard_normal(500).astype(np.float32)
    grads = [rng.standard_normal(500).astype(np.float32) for _ in range(4)]
    pg, og = _run_optimizer(name, cp, x0, grads, np.float32, OPT_KW[name])
    state = og.state_dict()
    assert all(not isinstance(v, cp.ndarray) for v in state.values())
    pc, oc = _run_optimizer(name, np, x0, grads[:2], np.float32, OPT_KW[name])
    oc.load_state_dict(state)
    pc.load(pg.data.get())
    for g in grads:
        for p, o, xp in ((pc, oc, np), (pg, og, cp)):
            p.grad[...] = xp.asarray(g)
            o.step()
    np.testing.assert_allclose(pg.data.get(), pc.data, rtol=1e-5, atol=1e-6)


def test_trainer_steps_on_a_thread_that_did_not_select_the_backend():
    """CUDA's current device is per thread: the training thread enters `backend.use()`. With
    several GPUs the last one is used, so a thread left on device 0 would be caught."""
    import threading

    import cupy as cp
    from swarmnode.kernels.backend import select_backend
    from swarmnode.kernels.optim import make_optimizer
    from swarmnode.node.train.data.datasets import load_dataset
    from swarmnode.node.train.model.builtin import build_model
    from swarmnode.node.train.trainer import Trainer

    index = cp.cuda.runtime.getDeviceCount() - 1
    backend = select_backend(f"cuda:{index}")
    data = load_dataset("digits")
    model = build_model("mlp:32", data.input_shape, data.n_classes, backend, seed=0)
    optimizer = make_optimizer("sgd", model.params, 0.05, momentum=0.9)
    trainer = Trainer(model, optimizer, data.X_train, data.y_train, 32, seed=0, backend=backend)
    before = model.params.data.get()
    seen: dict[str, object] = {}

    def train() -> None:
        try:
            with backend.use():
                seen["device"] = cp.cuda.Device().id
                seen["losses"] = [trainer.step() for _ in range(3)]
                cp.cuda.Device().synchronize()
            seen["after"] = cp.cuda.Device().id  # use() restores the thread's previous device
        except BaseException as exc:  # reported below, on the test's thread
            seen["error"] = exc

    thread = threading.Thread(target=train)
    thread.start()
    thread.join(timeout=60)
    assert not thread.is_alive() and "error" not in seen, seen.get("error")
    assert seen["device"] == index and seen["after"] == 0
    assert all(np.isfinite(seen["losses"]))
    assert model.params.data.device.id == index
    assert not np.array_equal(model.params.data.get(), before)  # the steps did update

    # evaluate() and load_state() enter the device themselves: the peer calls them from pool
    # threads (first evaluation, resume) that never entered `use()`.
    state = trainer.state()
    results: dict[str, object] = {}

    def elsewhere() -> None:
        try:
            results["eval"] = trainer.evaluate(data.X_test, data.y_test)
            trainer.load_state(state)
        except BaseException as exc:
            results["error"] = exc

    other = threading.Thread(target=elsewhere)
    other.start()
    other.join(timeout=60)
    assert not other.is_alive() and "error" not in results, results.get("error")
    assert np.isfinite(results["eval"]).all()
    np.testing.assert_array_equal(model.params.data.get(), state["params"])


def test_kernel_wrappers_refuse_bad_arrays():
    import cupy as cp
    from swarmnode.kernels.cuda_kernels import adamw_step, sgd_step
    from swarmnode.kernels.errors import ShapeError

    good = cp.zeros(8, cp.float32)
    bad = {
        "float64": cp.zeros(8, cp.float64),
        "strided": cp.zeros(16, cp.float32)[::2],
        "2-D": cp.zeros((2, 4), cp.float32),
        "size": cp.zeros(9, cp.float32),
        "host": np.zeros(8, np.float32),
    }
    for what, arr in bad.items():
        for pos in range(3):
            args = [good.copy(), good.copy(), good.copy()]
            args[pos] = arr
            with pytest.raises(ShapeError):
                sgd_step(*args, 0.1, 0.9, 0.0)
            assert what  # keeps the failing case visible in the traceback
    kw = dict(lr=0.1, beta1=0.9, beta2=0.999, eps=1e-8, wd=0.0)
    with pytest.raises(ShapeError):
        adamw_step(good, good, good, bad["float64"], t=1, **kw)
    with pytest.raises(ShapeError, match="step count"):
        adamw_step(good, good.copy(), good.copy(), good.copy(), t=0, **kw)
