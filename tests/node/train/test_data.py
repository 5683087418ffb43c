"""Data loading: the bundled digits, the synthetic generator, and every malformed-npz case."""

from __future__ import annotations

import io
import subprocess
import sys
import warnings
import zipfile
from pathlib import Path

import numpy as np
import pytest
from swarmnode.node.train.data.datasets import load_dataset, make_synthetic
from swarmnode.node.train.errors import DataError

REPO = Path(__file__).resolve().parents[3]
# Port 0: the peer binds a free port, so runs never collide with another peer on 7070.
START = ["start", "--listen", "127.0.0.1:0"]


def _good_arrays() -> dict[str, np.ndarray]:
    rng = np.random.default_rng(0)
    return {
        "X_train": rng.integers(0, 256, size=(20, 4, 4)).astype(np.uint8),
        "y_train": rng.integers(0, 3, size=20).astype(np.int64),
        "X_test": rng.integers(0, 256, size=(6, 4, 4)).astype(np.uint8),
        "y_test": rng.integers(0, 3, size=6).astype(np.int64),
    }


def _write(tmp_path: Path, **changes: object) -> Path:
    arrays = _good_arrays()
    for k, v in changes.items():
        if v is None:
            del arrays[k]
        else:
            arrays[k] = v
    path = tmp_path / "data.npz"
    np.savez(path, **arrays)
    return path


def test_digits_loads_scaled_and_validated() -> None:
    ds = load_dataset("digits")
    assert ds.X_train.shape == (1437, 8, 8) and ds.X_test.shape == (360, 8, 8)
    assert ds.X_train.dtype == np.float32 and ds.y_train.dtype == np.int64
    assert ds.n_classes == 10 and ds.input_shape == (8, 8)
    # pixels 0..16 scaled by 16 into [0, 1], with the maximum actually reached
    assert ds.X_train.min() == 0.0 and ds.X_train.max() == 1.0
    assert set(np.unique(ds.y_train)) == set(range(10))


def test_good_npz_roundtrip(tmp_path: Path) -> None:
    arrays = _good_arrays()
    ds = load_dataset(str(_write(tmp_path)))
    assert ds.n_classes == int(max(arrays["y_train"].max(), arrays["y_test"].max())) + 1
    scale = 1.0 / arrays["X_train"].max()
    np.testing.assert_allclose(ds.X_test, arrays["X_test"] * scale, rtol=1e-6)
    np.testing.assert_array_equal(ds.y_train, arrays["y_train"])


def test_float_inputs_keep_their_scale(tmp_path: Path) -> None:
    X = np.linspace(-5, 5, 20 * 3, dtype=np.float64).reshape(20, 3)
    ds = load_dataset(str(_write(tmp_path, X_train=X, X_test=X[:6])))
    np.testing.assert_allclose(ds.X_train, X.astype(np.float32))


BAD_CASES = {
    "missing": ({"y_test": None}, "missing array"),
    "length": ({"y_train": np.zeros(19, np.int64)}, "rows but y_train has 19"),
    "float_labels": ({"y_train": np.zeros(20, np.float32)}, "integer class labels"),
    "negative_label": ({"y_test": np.full(6, -1, np.int64)}, "negative label"),
    "label_2d": ({"y_train": np.zeros((20, 1), np.int64)}, "1-D vector"),
    "string_inputs": ({"X_train": np.array(["a"] * 20).reshape(20, 1)}, "must be numeric"),
    "nan": ({"X_test": np.full((6, 4, 4), np.nan, np.float32)}, "NaN or Inf"),
    "inf": ({"X_train": np.full((20, 4, 4), np.inf)}, "NaN or Inf"),
    "feature_shape": ({"X_test": np.zeros((6, 4, 5), np.uint8)}, "per sample"),
    "no_feature_axis": ({"X_train": np.zeros(20, np.uint8)}, "feature axis"),
    "one_class": (
        {"y_train": np.zeros(20, np.int64), "y_test": np.zeros(6, np.int64)},
        "only one class",
    ),
    "empty_train": (
        {"X_train": np.zeros((0, 4, 4), np.uint8), "y_train": np.zeros(0, np.int64)},
        "train split is empty",
    ),
}


@pytest.mark.parametrize("case", sorted(BAD_CASES))
def test_malformed_npz_raises_data_error(tmp_path: Path, case: str) -> None:
    changes, fragment = BAD_CASES[case]
    path = _write(tmp_path, **changes)
    with pytest.raises(DataError, match=fragment) as info:
        load_dataset(str(path))
    msg = str(info.value)
    assert "\n" not in msg and str(path) in msg


def test_object_array_is_refused_not_unpickled(tmp_path: Path) -> None:
    path = _write(tmp_path, X_train=np.array([object()] * 20, dtype=object))
    with pytest.raises(DataError, match=r"not a readable \.npz"):
        load_dataset(str(path))


@pytest.mark.parametrize("content", [b"", b"this is not a zip file", b"PK\x03\x04" + b"\x00" * 40])
def test_unreadable_file(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "junk.npz"
    path.write_bytes(content)
    with pytest.raises(DataError, match="not a readable"):
        load_dataset(str(path))


def test_truncated_npz(tmp_path: Path) -> None:
    path = _write(tmp_path)
    raw = path.read_bytes()
    path.write_bytes(raw[: len(raw) // 2])
    with pytest.raises(DataError):
        load_dataset(str(path))


def test_npy_file_is_a_data_error_not_a_crash(tmp_path: Path) -> None:
    path = tmp_path / "x.npy"
    np.save(path, np.zeros((4, 3)))
    with pytest.raises(DataError, match=r"single \.npy array, not an \.npz") as info:
        load_dataset(str(path))
    assert str(path) in str(info.value) and "\n" not in str(info.value)


def _compressed_npz_bytes() -> bytes:
    buf = io.BytesIO()
    rng = np.random.default_rng(0)
    arrays = {**_good_arrays(), "X_train": rng.random((200, 8))}
    arrays["y_train"] = rng.integers(0, 3, 200)
    arrays["X_test"] = rng.random((6, 8))
    np.savez_compressed(buf, **arrays)
    return buf.getvalue()


def test_corrupted_compressed_member_is_a_data_error(tmp_path: Path) -> None:
    raw = bytearray(_compressed_npz_bytes())
    # Damage the deflate stream of the first member (X_train, the largest), not the zip headers:
    # that is what raised zlib.error uncaught.
    info = zipfile.ZipFile(io.BytesIO(bytes(raw))).getinfo("X_train.npy")
    start = info.header_offset + 30 + len(info.filename.encode()) + len(info.extra)
    for i in range(start + 20, start + 60):
        raw[i] ^= 0xFF
    path = tmp_path / "damaged.npz"
    path.write_bytes(bytes(raw))
    with pytest.raises(DataError, match=r"corrupted or unsupported \.npz member") as exc_info:
        load_dataset(str(path))
    assert str(path) in str(exc_info.value) and "\n" not in str(exc_info.value)


def _npz_with_member(member: bytes) -> bytes:
    buf = io.BytesIO()
    np.savez(buf, **_good_arrays())
    out = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(buf.getvalue())) as src, zipfile.ZipFile(out, "w") as dst:
        for name in src.namelist():
            dst.writestr(name, member if name == "X_train.npy" else src.read(name))
    return out.getvalue()


@pytest.mark.parametrize("shape", [(10**6, 10**6), (2**40, 2**20)])
def test_header_claiming_a_huge_shape_is_a_data_error(tmp_path: Path, shape) -> None:
    header = io.BytesIO()
    np.lib.format.write_array_header_1_0(
        header, {"descr": "<f8", "fortran_order": False, "shape": shape}
    )
    path = tmp_path / "huge.npz"
    path.write_bytes(_npz_with_member(header.getvalue() + b"\x00" * 64))
    with pytest.raises(DataError) as info:
        load_dataset(str(path))
    assert str(path) in str(info.value) and "\n" not in str(info.value)


@pytest.mark.parametrize("where", ["X_train", "X_test"])
def test_float64_beyond_float32_range_is_refused(tmp_path: Path, where: str) -> None:
    X = np.ones((20, 4, 4))
    X_test = np.ones((6, 4, 4))
    (X if where == "X_train" else X_test)[0, 0, 0] = 1e300
    path = _write(tmp_path, X_train=X, X_test=X_test)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # numpy's overflow RuntimeWarning must not leak out
        with pytest.raises(DataError, match=f"{where} has values too large for float32"):
            load_dataset(str(path))


def test_float64_test_split_overflow_with_integer_train_split(tmp_path: Path) -> None:
    X_test = np.ones((6, 4, 4))
    X_test[1, 2, 3] = -1e300
    path = _write(tmp_path, X_test=X_test)  # X_train stays uint8: the integer scaling path
    with pytest.raises(DataError, match="X_test has values too large for float32"):
        load_dataset(str(path))


def test_missing_file_names_the_spec_grammar(tmp_path: Path) -> None:
    with pytest.raises(DataError, match=r"not found.*synthetic"):
        load_dataset(str(tmp_path / "nope.npz"))


def test_synthetic_is_seeded_and_validated() -> None:
    a = load_dataset("synthetic:100,7,4,3")
    b = make_synthetic(100, 7, 4, 3)
    np.testing.assert_array_equal(a.X_train, b.X_train)
    assert a.X_train.shape == (100, 7) and a.X_test.shape == (25, 7) and a.n_classes == 4
    assert not np.array_equal(a.X_train, load_dataset("synthetic:100,7,4,4").X_train)


@pytest.mark.parametrize(
    "spec",
    ["synthetic:", "synthetic:10,2", "synthetic:a,b,c", "synthetic:10,5,1", "synthetic:0,5,2"],
)
def test_bad_synthetic_spec(spec: str) -> None:
    with pytest.raises(DataError, match="bad synthetic spec"):
        load_dataset(spec)


@pytest.mark.slow
@pytest.mark.timeout(60)
@pytest.mark.parametrize("case", ["length", "nan", "feature_shape"])
def test_cli_exits_2_with_one_line_on_bad_npz(tmp_path: Path, case: str) -> None:
    changes, fragment = BAD_CASES[case]
    path = _write(tmp_path, **changes)
    proc = subprocess.run(
        [sys.executable, "-m", "swarmnode", *START, "--data", str(path), "--steps", "1"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and fragment in lines[0] and "Traceback" not in proc.stderr


def test_cli_on_npy_and_corrupted_npz_is_one_line_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from swarmnode.node.cli.command import main

    npy = tmp_path / "x.npy"
    np.save(npy, np.zeros((4, 3)))
    damaged = tmp_path / "damaged.npz"
    raw = bytearray(_compressed_npz_bytes())
    raw[len(raw) // 3 : len(raw) // 3 + 40] = bytes(40)
    damaged.write_bytes(bytes(raw))
    for path in (npy, damaged):
        assert main([*START, "--device", "cpu", "--data", str(path), "--steps", "1"]) == 2
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and str(path) in err, err


def test_the_data_fingerprint_tells_two_data_sets_of_one_shape_apart():
    """What a joiner compares with the swarm's (issue 34): the same spec gives the same print
    on every machine, another data set of the same model size another; a user's own wins."""
    from swarmnode.node.train.data import data_fingerprint, dataset_from_arrays

    digits, synthetic = load_dataset("digits"), load_dataset("synthetic:2000,64,10")
    assert data_fingerprint(digits) == data_fingerprint(load_dataset("digits"))
    assert data_fingerprint(digits) != data_fingerprint(synthetic)
    arrays = {k: getattr(digits, k) for k in ("X_train", "y_train", "X_test", "y_test")}
    assert data_fingerprint(dataset_from_arrays(arrays, "mine")) == data_fingerprint(digits)
    own = dataset_from_arrays({**arrays, "fingerprint": "imagenet-2012"}, "mine")
    assert data_fingerprint(own) == "imagenet-2012"
