"""Data sets: the bundled digits, a seeded synthetic generator, or any `.npz` file.

`load_dataset(spec)` is the one entry point. Whatever the source, the result is a validated
`Dataset` with float32 inputs and int64 labels in `[0, n_classes)`, so the trainer and the models
never have to re-check their input. Every problem with a file is a `DataError` whose message names
the file and the problem in one line: a peer started with a bad `--data` must say why and exit,
not crash half-way through its first step.

Spec grammar:

- `digits` — the bundled UCI handwritten digits (8x8 images, 10 classes, 1437 train / 360 test).
- `synthetic:N,D,C` or `synthetic:N,D,C,SEED` — N train samples (plus N//4 test samples) of D
  features in C classes: Gaussian clusters around seeded random centres. Deterministic in SEED
  (default 0); meant for benchmarks and tests, not for accuracy claims.
- `signal:N,L,C` or `signal:N,L,C,SEED` — a harder seeded task: N train samples (plus N//2 test)
  of 1-D signals of length L in C classes (a larger test split than synthetic, N//2). Each class is a sum of a few localized wavelets drawn
  from a small shared dictionary, seen at a random shift, gain and noise, with 10% of the *train*
  labels flipped at random. Few samples per class and label noise make a small shard easy to
  overfit (what exposes a swarm that mixes too rarely); the shift makes `cnn1d` the right model.
- a folder — four `.npy` files of those names, the inputs streamed from disk a batch at a time
  (node/train/data/streamed.py): a set larger than memory trains.
- anything else — a path to an `.npz` with arrays `X_train, y_train, X_test, y_test`.

A user's data source (`--data MODULE:FUNCTION`, or arrays given to `swarmnode.Peer`) is turned
into a `Dataset` by `dataset_from_arrays`: the same checks, except that its targets may be
floats (a regression for a user's model; `n_classes` is then 0).

Input scaling: integer inputs are divided by the largest value in `X_train` (digits: pixels 0..16
become 0..1); float inputs are kept as they are (the file's author chose their scale).
"""

from __future__ import annotations

import io
import lzma
import zipfile
import zlib
from dataclasses import dataclass, replace
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np
from swarmnode.node.train.data.streamed import is_streamed, load_npy_dir
from swarmnode.node.train.errors import DataError

REQUIRED_ARRAYS = ("X_train", "y_train", "X_test", "y_test")
SYNTHETIC_MAX_VALUES = 50_000_000  # N*D cap: a typo must not allocate tens of gigabytes
MAX_CLASSES = 65_536  # a stray huge label would otherwise size the output layer


@dataclass(frozen=True)
class Dataset:
    """A validated train/test split: labels in host memory (numpy), inputs there too or
    streamed (an `NpyRows`, a memmap: read a batch at a time, node/train/data/streamed.py)."""

    name: str
    X_train: Any  # float32, shape (n_train, *input_shape); or streamed
    y_train: np.ndarray  # int64 (or float32 targets of a user's data), shape (n_train,)
    X_test: Any  # float32, shape (n_test, *input_shape); or streamed
    y_test: np.ndarray  # like y_train, shape (n_test,)
    n_classes: int  # 0: the targets are not classes (a user's regression)
    fingerprint: str | None = None  # a user's own (node/train/data/fingerprint.py), else None

    @property
    def input_shape(self) -> tuple[int, ...]:
        return tuple(self.X_train.shape[1:])

    def describe(self) -> str:
        shape = "x".join(str(d) for d in self.input_shape)
        return (
            f"{self.name}: {len(self.y_train)} train / {len(self.y_test)} test, "
            f"input {shape}, {self.n_classes} classes"
        )


# every form `--data` takes, for the error that names none of them (the option's help says more)
DATA_FORMS = (
    "'digits', 'synthetic:N,D,C[,SEED]', 'signal:N,L,C[,SEED]', a .npz path, a folder of "
    "X_train.npy, y_train.npy, X_test.npy, y_test.npy, or MODULE:FUNCTION"
)


def load_dataset(spec: str) -> Dataset:
    """Load and validate the data set named by `spec` (see the module docstring)."""
    spec = spec.strip()
    if spec == "digits":
        return _load_digits()
    if spec.startswith("synthetic:") or spec == "synthetic":
        return make_synthetic(*parse_synthetic_spec(spec))
    if spec.startswith("signal:"):
        return make_signal(*parse_synthetic_spec(spec, kind="signal"))
    if Path(spec).is_dir():
        return dataset_from_arrays(load_npy_dir(spec), spec)
    return load_npz(spec)


def _load_digits() -> Dataset:
    # importlib.resources, not a path relative to __file__, so an installed wheel finds it too.
    resource = resources.files("swarmnode.node.train.data") / "digits.npz"
    try:
        raw = resource.read_bytes()
    except OSError as exc:
        raise DataError(f"bundled digits data set is missing: {exc}") from None
    return _from_npz_bytes(raw, "digits")


def load_npz(path: str | Path) -> Dataset:
    """Load a user-provided `.npz` file with `X_train, y_train, X_test, y_test`."""
    p = Path(path)
    if not p.is_file():
        raise DataError(f"data file {str(path)!r} not found (expected {DATA_FORMS})")
    try:
        raw = p.read_bytes()
    except OSError as exc:
        raise DataError(f"cannot read data file {str(path)!r}: {exc.strerror or exc}") from None
    return _from_npz_bytes(raw, str(path))


def _from_npz_bytes(raw: bytes, name: str) -> Dataset:
    arrays = _read_npz(raw, name)
    return validate_arrays(arrays, name)


def _read_npz(raw: bytes, name: str) -> dict[str, np.ndarray]:
    """Read the four arrays; any failure of the container itself is a DataError."""
    try:
        # allow_pickle=False: a data file must never be able to run code on load.
        loaded = np.load(io.BytesIO(raw), allow_pickle=False)
        if not isinstance(loaded, np.lib.npyio.NpzFile):
            # A .npy holds one bare array: there is no split to read from it.
            raise DataError(
                f"{name}: is a single .npy array, not an .npz archive of "
                f"{', '.join(REQUIRED_ARRAYS)} (save them with numpy.savez, or as four "
                ".npy files of those names in a folder, which streams them: give the folder)"
            )
        with loaded as npz:
            return _take_required(npz, name)
    except DataError:
        raise
    except ValueError as exc:
        # Object arrays (pickles), which we refuse, non-npz content, headers that do not parse
        # and arrays shorter than their header claims.
        raise DataError(f"{name}: not a readable .npz of plain arrays ({exc})") from None
    except MemoryError:
        # A damaged (or hostile) header can claim a shape far larger than the file.
        raise DataError(f"{name}: an array header claims more data than fits in memory") from None
    except (zlib.error, lzma.LZMAError, NotImplementedError, RuntimeError) as exc:
        # Damaged compressed members, or zip features numpy cannot read (encryption, odd methods).
        raise DataError(f"{name}: corrupted or unsupported .npz member ({exc})") from None
    except (OSError, EOFError, zipfile.BadZipFile, KeyError) as exc:
        raise DataError(f"{name}: not a readable .npz file ({type(exc).__name__}: {exc})") from None


def _take_required(npz: np.lib.npyio.NpzFile, name: str) -> dict[str, np.ndarray]:
    missing = [k for k in REQUIRED_ARRAYS if k not in npz.files]
    if missing:
        raise DataError(
            f"{name}: missing array(s) {', '.join(missing)} "
            f"(an .npz needs {', '.join(REQUIRED_ARRAYS)}; found {', '.join(npz.files) or 'none'})"
        )
    return {k: npz[k] for k in REQUIRED_ARRAYS}


def dataset_from_arrays(arrays: Any, name: str, *, any_targets: bool = False) -> Dataset:
    """A `Dataset` of a mapping (or 4-sequence) of `X_train, y_train, X_test, y_test`, with
    inputs in memory or streamed; `any_targets`: float targets allowed (a user's data)."""
    if isinstance(arrays, tuple | list) and len(arrays) == 4:
        arrays = dict(zip(REQUIRED_ARRAYS, arrays, strict=True))
    if not hasattr(arrays, "keys") or not hasattr(arrays, "__getitem__"):
        raise DataError(
            f"{name}: expected X_train, y_train, X_test, y_test (a dict or a 4-tuple), "
            f"got a {type(arrays).__name__}"
        )
    missing = [k for k in REQUIRED_ARRAYS if k not in arrays]
    if missing:
        raise DataError(f"{name}: missing {', '.join(missing)}")
    own = arrays.get("fingerprint") if hasattr(arrays, "get") else None
    # plain Python sequences are data in memory; only an array-like reader is streamed
    arrays = {
        k: np.asarray(v) if isinstance(v, list | tuple) else v
        for k, v in ((k, arrays[k]) for k in REQUIRED_ARRAYS)
    }
    if is_streamed(arrays["X_train"]) or is_streamed(arrays["X_test"]):
        data = _streamed_dataset(arrays, name, any_targets)
    else:
        plain = {k: np.asarray(arrays[k]) for k in REQUIRED_ARRAYS}
        data = validate_arrays(plain, name, any_targets=any_targets)
    # a user's data may say what makes it the same task elsewhere (fingerprint.py)
    return replace(data, fingerprint=str(own)) if own else data


def _streamed_dataset(arrays: Any, name: str, any_targets: bool) -> Dataset:
    """Shapes, dtypes and labels checked now; the inputs' values as each batch is read."""
    X_train, X_test = arrays["X_train"], arrays["X_test"]
    for key, X in (("X_train", X_train), ("X_test", X_test)):
        shape, dtype = tuple(getattr(X, "shape", ())), np.dtype(getattr(X, "dtype", object))
        if len(shape) < 2 or dtype.kind != "f":
            raise DataError(
                f"{name}: streamed {key} must be floats with a sample axis and a feature axis, "
                f"got {dtype}{list(shape)}"
            )
    y_train, y_test = (np.asarray(arrays[k]) for k in ("y_train", "y_test"))
    n_classes = _check_splits(X_train, y_train, X_test, y_test, name, any_targets)
    return Dataset(
        name=name,
        X_train=X_train,
        y_train=_targets(y_train),
        X_test=X_test,
        y_test=_targets(y_test),
        n_classes=n_classes,
    )


def _targets(y: np.ndarray) -> np.ndarray:
    return y.astype(np.int64) if y.dtype.kind in "iu" else y.astype(np.float32)


def _check_splits(
    X_train: Any, y_train: np.ndarray, X_test: Any, y_test: np.ndarray, name: str, any_targets: bool
) -> int:
    """Labels, lengths and per-sample shapes of both splits; the number of classes (0 for
    float targets, allowed only with `any_targets`)."""
    for key, y in (("y_train", y_train), ("y_test", y_test)):
        _check_labels(y, f"{name}: {key}", any_targets)
    for split, X, y in (("train", X_train, y_train), ("test", X_test, y_test)):
        if len(X) != len(y):
            raise DataError(
                f"{name}: X_{split} has {len(X)} rows but y_{split} has {len(y)} labels"
            )
    if len(y_train) == 0:
        raise DataError(f"{name}: the train split is empty")
    if len(y_test) == 0:
        raise DataError(f"{name}: the test split is empty")
    if tuple(X_train.shape[1:]) != tuple(X_test.shape[1:]):
        raise DataError(
            f"{name}: train inputs have shape {tuple(X_train.shape[1:])} per sample "
            f"but test inputs have {tuple(X_test.shape[1:])}"
        )
    if y_train.dtype.kind == "f" or y_test.dtype.kind == "f":
        return 0
    n_classes = int(max(y_train.max(), y_test.max())) + 1
    if n_classes > MAX_CLASSES:
        raise DataError(
            f"{name}: largest label is {n_classes - 1}; at most {MAX_CLASSES} classes are supported"
        )
    if n_classes < 2 and not any_targets:
        raise DataError(f"{name}: labels name only one class; a classifier needs at least two")
    return n_classes


def validate_arrays(
    arrays: dict[str, np.ndarray], name: str, *, any_targets: bool = False
) -> Dataset:
    """Check shapes, dtypes, label range and finiteness; return float32 / int64 arrays
    (float32 targets too, with `any_targets`)."""
    X_train, y_train = arrays["X_train"], arrays["y_train"]
    X_test, y_test = arrays["X_test"], arrays["y_test"]
    for key in ("X_train", "X_test"):
        _check_inputs(arrays[key], f"{name}: {key}")
    n_classes = _check_splits(X_train, y_train, X_test, y_test, name, any_targets)
    Xtr, Xte = _scale(X_train, X_test)
    _check_cast(Xtr, f"{name}: X_train")
    _check_cast(Xte, f"{name}: X_test")
    return Dataset(
        name=name,
        X_train=Xtr,
        y_train=_targets(y_train),
        X_test=Xte,
        y_test=_targets(y_test),
        n_classes=n_classes,
    )


def _check_inputs(X: np.ndarray, what: str) -> None:
    if X.ndim < 2:
        raise DataError(
            f"{what} must have a sample axis and at least one feature axis, got shape {X.shape}"
        )
    if X.dtype.kind not in "biuf":
        raise DataError(f"{what} must be numeric, got dtype {X.dtype}")
    if X.dtype.kind == "f" and not np.isfinite(X).all():
        raise DataError(f"{what} contains NaN or Inf values")


def _check_cast(X: np.ndarray, what: str) -> None:
    # NaN/Inf were refused before the cast, so a non-finite value here is a float64 beyond
    # float32's range (e.g. 1e300) that the cast turned into inf: it would poison the first step.
    if not np.isfinite(X).all():
        limit = float(np.finfo(np.float32).max)
        raise DataError(f"{what} has values too large for float32 (|x| > {limit:.3g})")


def _check_labels(y: np.ndarray, what: str, any_targets: bool = False) -> None:
    if y.ndim != 1:
        raise DataError(f"{what} must be a 1-D vector of class labels, got shape {y.shape}")
    if any_targets and y.dtype.kind == "f":
        if not np.isfinite(y).all():
            raise DataError(f"{what} contains NaN or Inf values")
        return
    if y.dtype.kind not in "iu":
        raise DataError(f"{what} must hold integer class labels, got dtype {y.dtype}")
    if len(y) and int(y.min()) < 0:
        raise DataError(
            f"{what} has a negative label ({int(y.min())}); labels must be in [0, n_classes)"
        )


def _scale(X_train: np.ndarray, X_test: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    # A float64 beyond float32's range overflows to inf here; the caller detects and names it,
    # so numpy's RuntimeWarning would only add a second, noisier line.
    with np.errstate(over="ignore"):
        if X_train.dtype.kind == "f":
            return (
                np.ascontiguousarray(X_train, dtype=np.float32),
                np.ascontiguousarray(X_test, dtype=np.float32),
            )
        # Integer pixels/counts: scale by the train maximum so the inputs land in [0, 1]-ish. The
        # test split uses the same factor (never its own), as any preprocessing fitted on train
        # must.
        top = float(X_train.max()) if X_train.size else 0.0
        scale = np.float32(1.0 / top) if top > 0 else np.float32(1.0)
        return (
            X_train.astype(np.float32) * scale,
            X_test.astype(np.float32) * scale,
        )


def parse_synthetic_spec(spec: str, kind: str = "synthetic") -> tuple[int, int, int, int]:
    """`synthetic:N,D,C[,SEED]` (or `signal:N,L,C[,SEED]`) -> (N, D, C, SEED)."""
    _, _, rest = spec.partition(":")
    parts = [p.strip() for p in rest.split(",")] if rest else []
    if len(parts) not in (3, 4):
        raise DataError(f"bad {kind} spec {spec!r}: expected {kind}:N,D,C or {kind}:N,D,C,SEED")
    try:
        values = [int(p) for p in parts]
    except ValueError:
        raise DataError(f"bad synthetic spec {spec!r}: N, D, C and SEED must be integers") from None
    n, d, c = values[:3]
    seed = values[3] if len(values) == 4 else 0
    if n < 1 or d < 1 or c < 2:
        raise DataError(f"bad synthetic spec {spec!r}: need N >= 1, D >= 1 and C >= 2")
    if n * d > SYNTHETIC_MAX_VALUES:
        raise DataError(
            f"bad synthetic spec {spec!r}: N*D = {n * d} exceeds {SYNTHETIC_MAX_VALUES}"
        )
    return n, d, c, seed


def make_synthetic(n: int, d: int, n_classes: int, seed: int = 0) -> Dataset:
    """Seeded Gaussian clusters with unit noise: learnable, never trivially separable.

    Centres are scaled by 3/sqrt(D) so any two lie ~4.2 noise-stds apart whatever D is (unscaled,
    high-D clusters would be separable after a handful of steps and benchmark nothing).
    """
    rng = np.random.default_rng(seed)
    centres = rng.standard_normal((n_classes, d)).astype(np.float32) * np.float32(3 / np.sqrt(d))
    n_test = max(n // 4, 1)

    def draw(count: int) -> tuple[np.ndarray, np.ndarray]:
        y = rng.integers(0, n_classes, size=count)
        X = centres[y] + rng.standard_normal((count, d), dtype=np.float32)
        return X, y.astype(np.int64)

    X_train, y_train = draw(n)
    X_test, y_test = draw(n_test)
    return Dataset(
        name=f"synthetic:{n},{d},{n_classes},{seed}",
        X_train=X_train,
        y_train=y_train,
        X_test=X_test,
        y_test=y_test,
        n_classes=n_classes,
    )


SIGNAL_LABEL_NOISE = 0.1  # fraction of train labels replaced by a random class
SIGNAL_DICTIONARY = 12  # wavelets shared by all classes: classes differ in which and where
SIGNAL_PARTS = 3  # wavelets per class
SIGNAL_NOISE = 0.6  # std of the additive Gaussian noise (templates peak at ~2)


def make_signal(n: int, length: int, n_classes: int, seed: int = 0) -> Dataset:
    """Seeded 1-D signal classification that a small shard overfits (see the module doc).

    Classes are built from a shared dictionary, so two classes often share a wavelet and differ
    only in the others or in where they sit: telling them apart needs the whole shape. Each
    sample is its class template circularly shifted by up to L/8, scaled by a gain in
    [0.6, 1.4], plus unit-variance Gaussian noise (templates peak at ~2).
    """
    if length < 8:
        raise DataError(f"signal length must be >= 8, got {length}")
    rng = np.random.default_rng([seed, 0x5167])
    t = np.arange(length, dtype=np.float64)
    width = rng.uniform(1.5, 4.0, SIGNAL_DICTIONARY)
    freq = rng.uniform(0.2, 1.2, SIGNAL_DICTIONARY)
    templates = np.zeros((n_classes, length))
    for c in range(n_classes):
        for k in rng.choice(SIGNAL_DICTIONARY, SIGNAL_PARTS, replace=False):
            mu = rng.uniform(0, length)
            d = (t - mu + length / 2) % length - length / 2  # circular distance to the centre
            sign = rng.choice([-1.0, 1.0])
            templates[c] += sign * 2.0 * np.exp(-(d**2) / (2 * width[k] ** 2)) * np.cos(freq[k] * d)
    max_shift = max(length // 8, 1)

    def draw(count: int, label_noise: float) -> tuple[np.ndarray, np.ndarray]:
        y = rng.integers(0, n_classes, size=count)
        shifts = rng.integers(-max_shift, max_shift + 1, size=count)
        idx = (t[None, :].astype(np.int64) - shifts[:, None]) % length
        gain = rng.uniform(0.6, 1.4, size=(count, 1))
        X = templates[y[:, None], idx] * gain + SIGNAL_NOISE * rng.standard_normal((count, length))
        flip = rng.random(count) < label_noise
        y = np.where(flip, rng.integers(0, n_classes, size=count), y)
        return X.astype(np.float32), y.astype(np.int64)

    X_train, y_train = draw(n, SIGNAL_LABEL_NOISE)
    X_test, y_test = draw(max(n // 2, 1), 0.0)  # N//2: a 1-point change is ~10 samples, not noise
    return Dataset(
        name=f"signal:{n},{length},{n_classes},{seed}",
        X_train=X_train,
        y_train=y_train,
        X_test=X_test,
        y_test=y_test,
        n_classes=n_classes,
    )
