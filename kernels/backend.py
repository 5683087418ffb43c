"""One place picks the array module: numpy on the CPU, cupy on a CUDA device.

`select_backend("auto")` uses cupy only when it imports *and* a device exists, so the same command
line works on a GPU box and on a laptop. cupy is imported lazily: everything else in swarmnode
imports and runs without it.
"""

from __future__ import annotations

import contextlib
import re
from dataclasses import dataclass
from types import ModuleType
from typing import Any

import numpy as np
from swarmnode.kernels.errors import BackendError

_DEVICE_RE = re.compile(r"^(?:auto|cpu|cuda(?::(\d+))?)$")
DEVICE_HELP = "expected auto, cpu, cuda or cuda:N"


@dataclass(frozen=True)
class Backend:
    """The array module (`xp`) plus which device it computes on."""

    name: str  # "numpy" or "cupy"
    xp: ModuleType
    device_id: int | None = None

    @property
    def is_gpu(self) -> bool:
        return self.name == "cupy"

    def asarray(self, a: Any, dtype: Any = None) -> Any:
        """`a` (host or device) as an array of this backend; no copy when it already is one."""
        if self.is_gpu:
            with self.xp.cuda.Device(self.device_id):
                return self.xp.asarray(a, dtype=dtype)
        return np.asarray(to_numpy(a), dtype=dtype)

    def use(self) -> contextlib.AbstractContextManager[Any]:
        """A context manager that makes this backend's device current on the calling thread.

        CUDA's current device is per thread: `select_backend` makes it current only on the thread
        that selected it, so any other thread that computes (the training worker) must enter
        this, or `--device cuda:1` would launch its kernels on device 0. A no-op for numpy.
        """
        if self.is_gpu:
            return self.xp.cuda.Device(self.device_id)  # restores the previous device on exit
        return contextlib.nullcontext()

    def describe(self) -> str:
        """`cpu` or `cuda:N (device name)`, for status lines and logs."""
        if not self.is_gpu:
            return "cpu"
        props = self.xp.cuda.runtime.getDeviceProperties(self.device_id)
        name = props["name"].decode() if isinstance(props["name"], bytes) else props["name"]
        return f"cuda:{self.device_id} ({name})"


CPU = Backend("numpy", np, None)


def _cupy() -> ModuleType | None:
    try:
        import cupy
    except Exception:  # not installed, or a broken CUDA install: both mean "no GPU path"
        return None
    return cupy


def cuda_device_count() -> int:
    """How many CUDA devices cupy sees (0 without cupy, a driver or a device)."""
    cp = _cupy()
    if cp is None:
        return 0
    try:
        return int(cp.cuda.runtime.getDeviceCount())
    except Exception:  # no driver / no device raise CUDARuntimeError and friends
        return 0


def select_backend(device: str = "auto") -> Backend:
    """`auto`, `cpu`, `cuda` or `cuda:N` -> a Backend; `cuda` without a GPU is a BackendError."""
    if not isinstance(device, str):
        raise BackendError(f"--device {device!r}: {DEVICE_HELP}")
    text = device.strip().lower()
    m = _DEVICE_RE.match(text)
    if not m:
        raise BackendError(f"--device {device!r}: {DEVICE_HELP}")
    if text == "cpu":
        return CPU
    count = cuda_device_count()
    if text == "auto":
        return _gpu(0) if count > 0 else CPU
    if count == 0:
        why = "cupy is not installed" if _cupy() is None else "no CUDA device was found"
        raise BackendError(
            f"--device {device}: {why} (install swarmnode[cuda12] or use --device cpu)"
        )
    index = int(m.group(1) or 0)
    if index >= count:
        raise BackendError(
            f"--device {device}: only {count} CUDA device(s) present (cuda:0..cuda:{count - 1})"
        )
    return _gpu(index)


def _gpu(index: int) -> Backend:
    cp = _cupy()
    if cp is None:  # cuda_device_count() said yes a moment ago; keep the error one line anyway
        raise BackendError("cupy disappeared while selecting the device")
    cp.cuda.Device(index).use()
    return Backend("cupy", cp, index)


DLPACK_CPU, DLPACK_CUDA = 1, 2  # DLDeviceType codes (`__dlpack_device__()[0]`)


def dlpack_module(kind: int) -> ModuleType | None:
    """The array module that takes a DLPack tensor of device type `kind` without a copy
    (`module.from_dlpack`): numpy for the CPU, cupy for CUDA (`BackendError` without cupy);
    None for any other device."""
    if kind == DLPACK_CPU:
        return np
    if kind != DLPACK_CUDA:
        return None
    cp = _cupy()
    if cp is None:
        raise BackendError("a CUDA tensor is read through cupy, which does not import here")
    return cp


def is_device_array(a: Any) -> bool:
    """True for a cupy array (checked by module name, so cupy is never imported here)."""
    return type(a).__module__.split(".")[0] == "cupy"


def array_module(a: Any) -> ModuleType:
    """numpy or cupy, whichever `a` belongs to."""
    if type(a) is np.ndarray or not is_device_array(a):  # fast path: called per layer per step
        return np
    cp = _cupy()
    return cp if cp is not None else np


def to_numpy(a: Any) -> np.ndarray:
    """A host numpy array of `a` (a copy for device arrays, no copy for numpy ones)."""
    if isinstance(a, np.ndarray):
        return a
    if is_device_array(a):
        return a.get()
    return np.asarray(a)
