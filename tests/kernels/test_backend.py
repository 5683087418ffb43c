"""Backend choice (without a GPU here: the device count is faked) and the flat parameter buffer."""

from __future__ import annotations

import dataclasses
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import swarmnode.kernels.backend as kb
from swarmnode.kernels.backend import CPU, Backend, array_module, select_backend, to_numpy
from swarmnode.kernels.errors import BackendError, ShapeError, SwarmnodeError
from swarmnode.kernels.flat import FlatParams

pytestmark = pytest.mark.timeout(30)


@pytest.fixture
def no_cuda(monkeypatch):
    monkeypatch.setattr(kb, "cuda_device_count", lambda: 0)


def test_cpu_and_auto_pick_numpy_without_a_device(no_cuda):
    for device in ("cpu", "auto", " AUTO ", "Cpu"):
        backend = select_backend(device)
        assert backend.name == "numpy" and backend.xp is np and backend.device_id is None
    assert select_backend() is CPU
    assert CPU.describe() == "cpu" and not CPU.is_gpu


@pytest.mark.parametrize("device", ["cuda", "cuda:0", "cuda:3"])
def test_cuda_without_a_device_is_a_one_line_backend_error(no_cuda, device):
    with pytest.raises(BackendError, match="use --device cpu") as info:
        select_backend(device)
    assert "\n" not in str(info.value) and isinstance(info.value, SwarmnodeError)


def test_cuda_index_beyond_the_devices_present(monkeypatch):
    monkeypatch.setattr(kb, "cuda_device_count", lambda: 2)
    with pytest.raises(BackendError, match=r"only 2 CUDA device\(s\)"):
        select_backend("cuda:2")


@pytest.mark.parametrize("device", ["tpu", "cuda:", "cuda:-1", "cuda:x", "cpu:0", "auto:1", "", 0])
def test_malformed_device_strings(no_cuda, device):
    with pytest.raises(BackendError, match="expected auto, cpu, cuda or cuda:N"):
        select_backend(device)


@pytest.mark.slow
def test_without_cupy_everything_imports_and_auto_is_cpu():
    """A fresh interpreter where `import cupy` fails: every kernels module and the model specs
    import, `auto` is the CPU, and `cuda` says cupy is missing."""
    code = """
import sys
sys.modules["cupy"] = None  # makes `import cupy` raise ImportError
import swarmnode.kernels.backend, swarmnode.kernels.flat, swarmnode.kernels.layers, swarmnode.kernels.model, swarmnode.kernels.optim
import swarmnode.kernels.cuda_kernels, swarmnode.node.train.model.builtin
from swarmnode.kernels.backend import select_backend
from swarmnode.kernels.errors import BackendError
assert select_backend("auto").name == "numpy"
try:
    select_backend("cuda")
except BackendError as exc:
    print(exc)
"""
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
        cwd=Path(__file__).resolve().parents[2],  # the repository root, whatever pytest's cwd
    )
    assert "cupy is not installed" in out.stdout


def test_backend_is_frozen_and_converts_to_host_arrays():
    with pytest.raises(dataclasses.FrozenInstanceError):
        CPU.name = "cupy"  # type: ignore[misc]
    a = np.arange(3, dtype=np.float64)
    assert to_numpy(a) is a  # no copy for host arrays
    assert to_numpy([1, 2]).tolist() == [1, 2]
    assert CPU.asarray(a) is a
    assert CPU.asarray(a, dtype=np.float32).dtype == np.float32
    assert array_module(a) is np and array_module(3.0) is np
    assert Backend("numpy", np) == CPU


def test_cpu_use_is_a_reusable_no_op_context_on_any_thread():
    import threading

    results = []

    def work() -> None:
        with CPU.use() as entered:
            results.append((entered, CPU.asarray([1.0, 2.0]).sum()))

    with CPU.use():
        work()
    t = threading.Thread(target=work)
    t.start()
    t.join(timeout=10)
    assert results == [(None, 3.0), (None, 3.0)]


def test_gpu_use_enters_the_backends_own_device():
    """Without a GPU: a stand-in cupy records which device `use()` makes current."""
    entered: list[int] = []

    class Device:
        def __init__(self, index: int) -> None:
            self.index = index

        def __enter__(self) -> Device:
            entered.append(self.index)
            return self

        def __exit__(self, *exc: object) -> None:
            entered.append(-1)

    fake = type("cupy", (), {"cuda": type("cuda", (), {"Device": Device})})
    backend = Backend("cupy", fake, 3)  # type: ignore[arg-type]
    with backend.use():
        assert entered == [3]
    assert entered == [3, -1]


# --- FlatParams --------------------------------------------------------------------------------


def test_views_share_memory_with_the_flat_vector():
    p = FlatParams([("W", (3, 4)), ("b", (4,))])
    assert p.size == 16 and p.data.dtype == np.float32 and p.grad.shape == (16,)
    assert p.data.flags.c_contiguous and p.grad.flags.c_contiguous
    p.views["W"][...] = 1.0
    p.grads["b"][...] = 2.0
    assert p.data[:12].sum() == 12 and p.data[12:].sum() == 0
    assert p.grad[12:].sum() == 8 and p.grad[:12].sum() == 0
    assert p.offsets == {"W": (0, 12), "b": (12, 16)}
    for name in ("W", "b"):
        assert np.shares_memory(p.views[name], p.data)
        assert np.shares_memory(p.grads[name], p.grad)


def test_load_copies_in_place_and_keeps_views_valid():
    p = FlatParams([("W", (3, 4)), ("b", (4,))])
    data_before, view = p.data, p.views["b"]
    p.load(np.arange(16, dtype=np.float64))
    assert p.data is data_before and p.data.dtype == np.float32
    assert view.tolist() == [12, 13, 14, 15]
    p.zero_grad()
    assert not p.grad.any()


@pytest.mark.parametrize("bad", [np.zeros(3, np.float32), np.zeros((4, 4), np.float32), [1.0]])
def test_load_refuses_the_wrong_size_and_leaves_data_alone(bad):
    p = FlatParams([("w", (16,))])
    p.data[...] = 7
    with pytest.raises(ShapeError, match="expected a vector of 16"):
        p.load(bad)
    assert (p.data == 7).all()


def test_float64_for_gradient_checks_and_bad_specs():
    assert FlatParams([("w", (2,))], dtype=np.float64).data.dtype == np.float64
    with pytest.raises(ShapeError, match="float32 or float64"):
        FlatParams([("w", (2,))], dtype=np.int32)
    with pytest.raises(ShapeError, match="duplicate"):
        FlatParams([("w", (2,)), ("w", (3,))])
    with pytest.raises(ShapeError, match="negative"):
        FlatParams([("w", (2, -1))])
    assert FlatParams([]).size == 0


def test_a_dlpack_tensor_is_read_by_the_module_of_its_device(monkeypatch):
    """The CPU's is numpy, CUDA's cupy (a one-line BackendError where cupy does not import),
    any other device's none (the caller names it)."""
    assert kb.dlpack_module(kb.DLPACK_CPU) is np
    assert kb.dlpack_module(8) is None  # DLPack's kDLMetal, say
    monkeypatch.setattr(kb, "_cupy", lambda: None)
    with pytest.raises(BackendError, match="cupy"):
        kb.dlpack_module(kb.DLPACK_CUDA)
