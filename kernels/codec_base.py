"""What the codec kernels and their cupy twins share: sizes, `Packed`, the input checks."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from swarmnode.kernels.errors import ShapeError

# values per chunk: 1 MiB of float32. The numpy passes over one chunk stay in L2 (1 MiB per
# core on the development box), and int8's per-block passes get rows of 1024 values: at 64 Ki
# they had 256 and the 2-D reductions ran at half speed (scripts/bench/exchange/codecs.py). Part of
# the int8 layout on the wire: a frame names it (`chunk`), a peer with another refuses the frame.
CHUNK = 1 << 18
DEFAULT_BLOCK = 256
TOPK_BUCKET = 1 << 16  # topk indices: a count per bucket of this many values, then 16-bit offsets
F16_MAX = float(np.finfo(np.float16).max)
I8_MAX = 127.0


def _i8_min_amax() -> np.float32:
    """The least float32 a for which 127 / a is finite in float32 (~3.73e-37)."""
    i8, zero = np.float32(I8_MAX), np.float32(0)
    a = i8 / np.finfo(np.float32).max
    with np.errstate(over="ignore"):
        while not np.isfinite(i8 / a):
            a = np.nextafter(a, np.float32(np.inf))
        while np.isfinite(i8 / np.nextafter(a, zero)):
            a = np.nextafter(a, zero)
    return a


# int8 blocks with max |x| below this quantise to 0, like an all-zero block: their 127 / max|x|
# is Inf, and rint(x * Inf) has no int8 (numpy's cast of Inf gave 0, NumKong's 127 or -128,
# CUDA's another): the codecs agreed on every block but these. Their scale stays max|x| / 127.
I8_MIN_AMAX = _i8_min_amax()


@dataclass
class Packed:
    """An encoded vector: `parts` in wire order, `n` values once decoded, codec parameters."""

    codec: str
    n: int
    parts: dict[str, Any]
    block: int = 0  # int8 only
    k: int = 0  # topk only
    segs: tuple[tuple[int, int, int], ...] = ()  # lowrank only: (rows, cols, rank) per segment
    # topk2 only: the Rice parameter of its places and the bits of their unary stream (`topk2`)
    meta: dict[str, int] = field(default_factory=dict)

    @property
    def nbytes(self) -> int:
        return sum(int(p.nbytes) for p in self.parts.values())


@dataclass
class Sparse:
    """A vector of `n` values, zero except `values` (float32, finite) at `idx` (int64, strictly
    increasing, below n): a topk delta as its receiver applies it, without a dense decode."""

    n: int
    idx: np.ndarray
    values: np.ndarray

    def dense(self) -> np.ndarray:
        out = np.zeros(self.n, dtype=np.float32)
        out[self.idx] = self.values
        return out


def _check_vector(x: Any) -> None:
    if str(getattr(x, "dtype", "")) != "float32":
        raise ShapeError(f"codec input must be float32, got {getattr(x, 'dtype', type(x))}")
    if x.ndim != 1 or not x.flags.c_contiguous:
        raise ShapeError(f"codec input must be a 1-D contiguous vector, got shape {x.shape}")


def topk_count(n: int, ratio: float) -> int:
    """How many values topk keeps of n (at least one of a non-empty vector)."""
    if not 0.0 < ratio <= 1.0:
        raise ShapeError(f"topk ratio must be in (0, 1], got {ratio}")
    return min(n, max(1, math.ceil(ratio * n))) if n else 0


def topk_buckets(n: int) -> int:
    """How many index buckets (`TOPK_BUCKET` values each) a topk of n values counts."""
    return -(-n // TOPK_BUCKET)


def int8_layout(m: int, block: int) -> tuple[int, int]:
    """(groups, rows) of a chunk of m values: value o of the chunk is in group o % groups.

    A chunk is read as a (rows, groups) matrix, row-major, zero-padded to fill it: each group
    (column) is one block of at most `block` values sharing a scale. Strided blocks rather than
    contiguous runs, because numpy reduces and broadcasts over the rows of a matrix (one SIMD
    pass per row) several times faster than along its short last axis."""
    groups = -(-m // block)
    return groups, -(-m // groups)
