"""The fused C kernel of the int8 codec (kernels/_int8.c), when it was built, and why not.

The extension is optional: setuptools compiles it at install where it finds a C compiler
(setup.py, `Extension(..., optional=True)`) and skips it with a warning where it does
not; `kernels.compress` then runs its numpy/NumKong path, which computes the same bits at about
half the speed (docs/benchmarks.md, "Codecs"). `SWARMNODE_NATIVE=0` in the
environment turns the kernel off, to compare the two or to rule it out.

Why a CPython extension and not a plain shared object loaded with ctypes: the import system
finds it beside the package in an editable install and in a wheel alike (ctypes would need its
path, and its file name carries the interpreter's suffix either way), a missing or broken build
is an ImportError at one place, and the buffer protocol lets the C side check every buffer's
size and alignment before it touches memory. It releases the GIL around the loops.
"""

from __future__ import annotations

import functools
import importlib
import os
from collections.abc import Callable
from types import ModuleType

import numpy as np
from swarmnode.kernels.codec_base import CHUNK, I8_MIN_AMAX
from swarmnode.kernels.errors import BackendError, ShapeError

ABI = 2  # kernels/_int8.c, SWARMNODE_INT8_ABI: a .so built from an older source is not used
ENV = "SWARMNODE_NATIVE"


@functools.cache
def _load() -> tuple[ModuleType | None, str]:
    if os.environ.get(ENV, "").strip() == "0":
        return None, f"off ({ENV}=0)"
    try:
        _int8 = importlib.import_module("swarmnode.kernels._int8")
    except ImportError as e:
        return None, f"not built ({e})"
    if getattr(_int8, "ABI", None) != ABI:
        return None, f"stale build (ABI {getattr(_int8, 'ABI', None)}, source {ABI}): make venv"
    return _int8, "built"


def module() -> ModuleType | None:
    """The extension, or None where it is not built, stale or switched off."""
    return _load()[0]


def status() -> str:
    """`built`, or why the numpy path runs instead (for logs and benchmarks)."""
    return _load()[1]


def isas() -> tuple[str, ...]:
    """The copies of the loops this CPU runs (`baseline`, and `avx2` on x86-64 with AVX2); the
    last is the one used unless a call names another. Empty without the extension."""
    mod = module()
    return tuple(mod.ISAS) if mod is not None else ()


def _require() -> ModuleType:
    mod = module()
    if mod is None:
        raise BackendError(f"the int8 C kernel is {status()}")
    return mod


def _aligned(a: np.ndarray) -> np.ndarray:
    """`a`, or a copy where its buffer is not aligned to its dtype (an array read from a body at
    an odd offset: the C loops are vectorised for aligned float32)."""
    return a if a.flags.aligned else a.copy()


def _call(fn: Callable[..., None], *args: object) -> None:
    try:
        fn(*args)
    except (ValueError, BufferError) as e:  # sizes the caller should have checked: say so
        raise ShapeError(str(e)) from None


def encode_into(
    x: np.ndarray, block: int, scales: np.ndarray, q: np.ndarray, isa: str | None = None
) -> None:
    """Fill q (int8, x.size) and scales (float32, one per block) from float32 x, as
    `compress_ref.int8_encode` does, bit for bit (`isa`: one of `isas()`, None for the best)."""
    _call(_require().encode, _aligned(x), q, scales, block, CHUNK, float(I8_MIN_AMAX), isa)


def decode_into(
    q: np.ndarray, scales: np.ndarray, block: int, out: np.ndarray, isa: str | None = None
) -> None:
    """out[i] = q[i] * (the scale of i's block), as `compress_ref.int8_decode`, bit for bit."""
    mod = _require()
    for name, a, dtype in (
        ("q", q, np.int8),
        ("scales", scales, np.float32),
        ("out", out, np.float32),
    ):
        if a.dtype != dtype or not a.flags.c_contiguous:
            raise ShapeError(
                f"int8 decode: {name} must be contiguous {np.dtype(dtype)}, got {a.dtype}"
            )
    dst = out if out.flags.aligned else np.empty(out.shape, np.float32)
    _call(mod.decode, q, _aligned(scales), dst, block, CHUNK, isa)
    if dst is not out:
        out[...] = dst
