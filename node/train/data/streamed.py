"""Streamed data: inputs read a batch at a time, so a data set larger than memory trains.

`--data DIR` names a folder of four `.npy` files, `X_train.npy`, `y_train.npy`, `X_test.npy`,
`y_test.npy` (the arrays of the `.npz` form, saved one by one with `numpy.save`). The labels
are loaded (8 bytes a sample); the inputs stay on disk as `NpyRows`, and each minibatch's rows
are read when the trainer draws it (`Trainer._batch`), in ascending order, with one positional
read per run of neighbouring rows. An evaluation reads the test split 4096 rows at a time.

Read, not memory-mapped: the pages of a mapped file count towards the process's resident size
(RSS, what an OOM killer or a container limit sees) for as long as they stay mapped, so a
mapped set larger than the memory limit looks like a process that outgrew it. Reads leave the
caching to the kernel's page cache, which gives way under pressure without blaming anyone.

A shard (`--shard`) of streamed inputs is a `RowView`: the shard's row numbers over the same
reader, nothing copied. A user's data source (`--data MODULE:FUNCTION`) may return an
`NpyRows`, a `numpy.memmap` or any object with `len()`, `.shape`, `.dtype` and row indexing by
an ascending integer array (an h5py dataset) as its inputs: all are streamed the same way.

Checks: the header (shape, dtype, C order) and every split's per-sample shape at load; whether
each value is finite as its batch is read (a `DataError` naming the file and rows), since a
full scan would read the whole set before the first step.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import Any

import numpy as np
from swarmnode.node.train.errors import DataError

NPY_FILES = ("X_train", "y_train", "X_test", "y_test")


class NpyRows:
    """The rows of a C-order `.npy` file, read on demand; indexing gives float32 arrays."""

    def __init__(self, path: str | Path) -> None:
        self.path = str(path)
        shape, dtype, offset = _read_header(self.path)
        if dtype.kind != "f":
            raise DataError(
                f"{self.path}: streamed inputs must be floats, got {dtype} (scale integer "
                "inputs when you write the file, e.g. pixels / 255, as float32)"
            )
        if len(shape) < 2:
            raise DataError(
                f"{self.path} must have a sample axis and at least one feature axis, got {shape}"
            )
        self.shape = shape
        self.file_dtype = dtype
        self.dtype = np.dtype(np.float32)
        self._offset = offset
        self._row = int(np.prod(shape[1:])) * dtype.itemsize  # bytes per sample
        self._fd = os.open(self.path, os.O_RDONLY)
        self._lock = threading.Lock()  # guards bytes_read only: pread itself is positional
        self.bytes_read = 0  # what was read so far (tests check the set was streamed)

    def __len__(self) -> int:
        return int(self.shape[0])

    def __getitem__(self, key: Any) -> np.ndarray:
        if isinstance(key, slice):
            start, stop, step = key.indices(len(self))
            key = np.arange(start, stop, step, dtype=np.int64)
        rows = np.asarray(key, dtype=np.int64)
        if rows.ndim != 1:
            raise IndexError(f"NpyRows takes a 1-D array of row numbers, got shape {rows.shape}")
        if len(rows) and (rows.min() < 0 or rows.max() >= len(self)):
            raise IndexError(f"row numbers must be in [0, {len(self)})")
        out = np.empty((len(rows), *self.shape[1:]), dtype=self.file_dtype)
        self._read_rows(rows, out)
        with np.errstate(over="ignore"):  # a float64 past float32's range: caught just below
            out = out.astype(np.float32, copy=False)
        if not np.isfinite(out).all():
            bad = rows[~np.isfinite(out.reshape(len(rows), -1)).all(axis=1)]
            raise DataError(
                f"{self.path}: rows {bad[:5].tolist()} hold NaN, Inf or values beyond float32"
            )
        return out

    def _read_rows(self, rows: np.ndarray, out: np.ndarray) -> None:
        """One positional read per run of consecutive rows (rows must be ascending to merge)."""
        buf = out.reshape(len(rows), -1).view(np.uint8).reshape(len(rows), self._row)
        breaks = np.flatnonzero(np.diff(rows) != 1) + 1
        for lo, hi in zip(
            np.concatenate(([0], breaks)), np.concatenate((breaks, [len(rows)])), strict=True
        ):
            if hi <= lo:
                continue
            want = int(hi - lo) * self._row
            got = os.preadv(self._fd, [memoryview(buf[lo:hi]).cast("B")], self._pos(rows[lo]))
            if got != want:
                raise DataError(f"{self.path}: file ends early (row {int(rows[lo])}); truncated?")
        with self._lock:
            self.bytes_read += len(rows) * self._row

    def _pos(self, row: Any) -> int:
        return self._offset + int(row) * self._row

    def __del__(self) -> None:
        fd = getattr(self, "_fd", None)
        if fd is not None:
            os.close(fd)


class RowView:
    """Rows `index` (ascending) of a streamed `base`: a shard, without reading anything."""

    def __init__(self, base: Any, index: np.ndarray) -> None:
        self.base = base
        self.index = np.asarray(index, dtype=np.int64)
        self.shape = (len(self.index), *tuple(base.shape[1:]))
        self.dtype = base.dtype

    def __len__(self) -> int:
        return len(self.index)

    def __getitem__(self, key: Any) -> np.ndarray:
        return self.base[self.index[key]]


def is_streamed(X: Any) -> bool:
    """Inputs read on demand rather than held: anything but an in-memory numpy/cupy array."""
    if isinstance(X, np.memmap):
        return True
    return not (isinstance(X, np.ndarray) or type(X).__module__.split(".")[0] == "cupy")


def take_rows(X: Any, index: np.ndarray) -> Any:
    """Rows `index` of `X`: copied for an in-memory array, a `RowView` for streamed inputs."""
    if isinstance(X, np.ndarray) and not isinstance(X, np.memmap):
        return X[index]
    return RowView(X, np.sort(index))


def load_npy_dir(path: str | Path) -> dict[str, Any]:
    """The four arrays of a `.npy` folder: inputs as `NpyRows`, labels loaded."""
    folder = Path(path)
    missing = [n for n in NPY_FILES if not (folder / f"{n}.npy").is_file()]
    if missing:
        raise DataError(
            f"{path}: a data folder needs {', '.join(f + '.npy' for f in NPY_FILES)}; "
            f"missing {', '.join(f + '.npy' for f in missing)}"
        )
    arrays: dict[str, Any] = {}
    for name in NPY_FILES:
        file = folder / f"{name}.npy"
        if name.startswith("X"):
            arrays[name] = NpyRows(file)
            continue
        try:
            arrays[name] = np.load(file, allow_pickle=False)
        except (OSError, ValueError) as exc:
            raise DataError(f"{file}: not a readable .npy of plain values ({exc})") from None
    return arrays


def _read_header(path: str) -> tuple[tuple[int, ...], np.dtype, int]:
    """(shape, dtype, data offset) of a .npy file; C order only."""
    try:
        with open(path, "rb") as f:
            version = np.lib.format.read_magic(f)
            read = {
                (1, 0): np.lib.format.read_array_header_1_0,
                (2, 0): np.lib.format.read_array_header_2_0,
            }.get(version)
            if read is None:
                raise ValueError(f"unsupported .npy version {version}")
            shape, fortran, dtype = read(f)
            offset = f.tell()
            size = os.fstat(f.fileno()).st_size
    except OSError as exc:
        raise DataError(f"{path}: cannot read ({exc.strerror or exc})") from None
    except ValueError as exc:
        raise DataError(f"{path}: not a readable .npy file ({exc})") from None
    if fortran:
        raise DataError(f"{path}: Fortran-ordered arrays cannot be streamed; save it C-ordered")
    if dtype.hasobject:
        raise DataError(f"{path}: holds Python objects; only plain numbers can be streamed")
    need = offset + int(np.prod(shape)) * dtype.itemsize
    if size < need:
        raise DataError(f"{path}: {size} bytes, the header promises {need}: truncated")
    return tuple(int(d) for d in shape), dtype, offset
