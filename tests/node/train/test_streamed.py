"""Streamed data (node/train/data/streamed.py): a folder of .npy files is read a batch at a time, so
a set larger than a memory budget trains, sharded or whole."""

from __future__ import annotations

import tracemalloc
from pathlib import Path

import numpy as np
import pytest
from swarmnode.node.train.build import build_trainer, load_shard
from swarmnode.node.train.config import NodeConfig
from swarmnode.node.train.data.datasets import dataset_from_arrays, load_dataset, make_synthetic
from swarmnode.node.train.data.shard import shard_indices
from swarmnode.node.train.data.streamed import NpyRows, RowView
from swarmnode.node.train.errors import DataError


def _save(folder: Path, n: int, d: int, n_test: int | None = None) -> Path:
    data = make_synthetic(n, d, 10, seed=1)
    folder.mkdir(parents=True, exist_ok=True)
    for name in ("X_train", "y_train", "X_test", "y_test"):
        a = getattr(data, name)
        np.save(folder / f"{name}.npy", a[:n_test] if name.endswith("test") else a)
    return folder


def test_rows_read_what_numpy_saved(tmp_path):
    folder = _save(tmp_path / "d", 500, 7)
    whole = np.load(folder / "X_train.npy")
    rows = NpyRows(folder / "X_train.npy")
    assert len(rows) == 500 and rows.shape == (500, 7)
    idx = np.array([0, 1, 2, 9, 10, 40, 499])  # runs of neighbours and single rows
    assert np.array_equal(rows[idx], whole[idx])
    assert np.array_equal(rows[100:164], whole[100:164])
    assert rows.bytes_read == (len(idx) + 64) * 7 * 4


def test_a_folder_streams_and_a_shard_is_a_view(tmp_path):
    folder = _save(tmp_path / "d", 600, 5)
    data = load_dataset(str(folder))
    assert isinstance(data.X_train, NpyRows) and isinstance(data.X_test, NpyRows)
    assert data.n_classes == 10 and data.input_shape == (5,)
    cfg = NodeConfig(data=str(folder), shard=(1, 3), partition="dirichlet:0.5")
    _, X, y = load_shard(cfg)
    idx = shard_indices(data.y_train, 3, 1, "dirichlet:0.5", 0)
    assert isinstance(X, RowView) and len(X) == len(idx) and data.X_train.bytes_read == 0
    assert np.array_equal(X[np.arange(len(idx))], np.load(folder / "X_train.npy")[idx])
    assert np.array_equal(y, data.y_train[idx])


def test_a_users_memmap_is_streamed_too(tmp_path):
    folder = _save(tmp_path / "d", 100, 3)
    arrays = {n: np.load(folder / f"{n}.npy", mmap_mode="r") for n in ("X_train", "X_test")}
    arrays |= {n: np.load(folder / f"{n}.npy") for n in ("y_train", "y_test")}
    data = dataset_from_arrays(arrays, "mine", any_targets=True)
    assert isinstance(data.X_train, np.memmap)  # not read into memory


@pytest.mark.parametrize(
    ("spoil", "message"),
    [
        (lambda f: np.save(f / "X_train.npy", np.ones((600, 5), np.int32)), "must be floats"),
        (lambda f: (f / "y_test.npy").unlink(), "missing y_test.npy"),
        (lambda f: _truncate(f / "X_train.npy"), "truncated"),
        (lambda f: np.save(f / "X_test.npy", np.ones((150, 4), np.float32)), "per sample"),
        (lambda f: np.save(f / "y_train.npy", np.ones(599, np.int64)), "600 rows but y_train"),
    ],
)
def test_a_bad_folder_is_one_clear_error(tmp_path, spoil, message):
    folder = _save(tmp_path / "d", 600, 5)
    spoil(folder)
    with pytest.raises(DataError, match=message):
        load_dataset(str(folder))


def _truncate(path: Path) -> None:
    raw = path.read_bytes()
    path.write_bytes(raw[: len(raw) - 100])


def test_non_finite_rows_are_named_when_read(tmp_path):
    folder = _save(tmp_path / "d", 100, 4)
    X = np.load(folder / "X_train.npy")
    X[17, 2] = np.nan
    np.save(folder / "X_train.npy", X)
    rows = load_dataset(str(folder)).X_train
    assert np.isfinite(rows[np.arange(10)]).all()
    with pytest.raises(DataError, match=r"X_train.npy: rows \[17\] hold NaN"):
        rows[np.arange(10, 20)]


@pytest.mark.timeout(60)
def test_a_set_larger_than_the_memory_budget_trains(tmp_path):
    """48 MB of inputs on disk, a 12 MB budget: one epoch reads every row, the process never
    holds more than a few batches (and one 4096-row chunk of the test split), and the model
    learns."""
    budget = 12 << 20
    folder = _save(tmp_path / "big", 24_000, 512, n_test=2000)
    size = (folder / "X_train.npy").stat().st_size
    assert size > 3 * budget
    tracemalloc.start()
    try:
        cfg = NodeConfig(model="linear", data=str(folder), batch_size=250, lr=0.05, device="cpu")
        trainer, data, _ = build_trainer(cfg.validate())
        for _ in range(24_000 // 250):  # one epoch: every sample once
            trainer.step()
        acc = trainer.evaluate(data.X_test, data.y_test)[1]
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert data.X_train.bytes_read >= size - 128  # all of it (less the header)
    assert peak < budget, f"peak {peak / 2**20:.1f} MiB"
    assert acc >= 0.85, acc


def test_streamed_training_is_the_in_memory_training(tmp_path):
    """The same seed trains the same model (up to the sum order within a batch)."""
    folder = _save(tmp_path / "d", 400, 6)
    streamed = build_trainer(NodeConfig(model="mlp:8", data=str(folder)).validate())[0]
    arrays = {n: np.load(folder / f"{n}.npy") for n in ("X_train", "y_train", "X_test", "y_test")}
    plain = build_trainer(
        NodeConfig(model="mlp:8", data=dataset_from_arrays(arrays, "plain")).validate()
    )[0]
    assert streamed.streamed and not plain.streamed
    for _ in range(30):
        streamed.step()
        plain.step()
    np.testing.assert_allclose(streamed.model.params.data, plain.model.params.data, atol=1e-5)
