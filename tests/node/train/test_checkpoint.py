"""Checkpoints: round trip, atomic writes, keep-last-K, corruption detection and fallback."""

from __future__ import annotations

import logging
import os
from pathlib import Path

import numpy as np
import pytest
from swarmnode.node.train import checkpoint as ck
from swarmnode.node.train.checkpoint import (
    list_checkpoints,
    load_checkpoint,
    load_latest,
    save_checkpoint,
)
from swarmnode.node.train.errors import CheckpointError

from tests.node.train.lock_holder import lock_held_elsewhere


def _state(step: int) -> dict:
    rng = np.random.default_rng(step)
    return {
        "step": step,
        "params": rng.standard_normal(100).astype(np.float32),
        "optimizer": {"name": "sgd", "lr": 0.1, "buffers": [rng.standard_normal(100), None]},
        "rng": rng.bit_generator.state,  # holds 128-bit ints
        "meta": {"model": "mlp:8", "tags": ("a", "b")},
    }


def test_roundtrip_preserves_arrays_and_nested_values(tmp_path: Path) -> None:
    s = _state(7)
    path = save_checkpoint(tmp_path, s)
    got = load_checkpoint(path)
    assert got["step"] == 7 and got["meta"] == {"model": "mlp:8", "tags": ["a", "b"]}
    np.testing.assert_array_equal(got["params"], s["params"])
    assert got["params"].dtype == np.float32
    np.testing.assert_array_equal(got["optimizer"]["buffers"][0], s["optimizer"]["buffers"][0])
    assert got["optimizer"]["buffers"][1] is None
    assert got["rng"] == s["rng"]


def test_keeps_last_k_and_latest_is_highest_step(tmp_path: Path) -> None:
    for step in [10, 20, 30, 40, 50]:
        save_checkpoint(tmp_path, _state(step), keep=3)
    assert [s for s, _ in list_checkpoints(tmp_path)] == [50, 40, 30]
    assert load_latest(tmp_path)["step"] == 50


def test_empty_or_missing_dir_gives_none(tmp_path: Path) -> None:
    assert load_latest(tmp_path) is None
    assert load_latest(tmp_path / "does-not-exist") is None


def _damage_truncate(p: Path) -> None:
    p.write_bytes(p.read_bytes()[:-100])


def _damage_flip(p: Path) -> None:
    raw = bytearray(p.read_bytes())
    raw[len(raw) // 2] ^= 0xFF
    p.write_bytes(bytes(raw))


def _damage_empty(p: Path) -> None:
    p.write_bytes(b"")


def _damage_magic(p: Path) -> None:
    p.write_bytes(b"NOTACKPT" + p.read_bytes()[8:])


@pytest.mark.parametrize("damage", [_damage_truncate, _damage_flip, _damage_empty, _damage_magic])
def test_damaged_newest_falls_back_to_previous(
    tmp_path: Path, damage, caplog: pytest.LogCaptureFixture
) -> None:
    save_checkpoint(tmp_path, _state(1))
    newest = save_checkpoint(tmp_path, _state(2))
    damage(newest)
    with pytest.raises(CheckpointError):
        load_checkpoint(newest)
    with caplog.at_level(logging.WARNING, logger="swarmnode.node.train.checkpoint"):
        got = load_latest(tmp_path)
    assert got is not None and got["step"] == 1
    np.testing.assert_array_equal(got["params"], _state(1)["params"])
    assert newest.name in caplog.text


def test_all_damaged_gives_none(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """Issue 34 item 16: every checkpoint damaged was a fresh start without a word."""
    for step in (1, 2):
        _damage_flip(save_checkpoint(tmp_path, _state(step)))
    with caplog.at_level(logging.INFO, logger="swarmnode.node.train.checkpoint"):
        assert load_latest(tmp_path) is None
    [line] = [r for r in caplog.records]
    assert line.levelno == logging.WARNING
    said = line.getMessage()
    assert said.startswith(f"all 2 checkpoints in {tmp_path} are damaged (newest: ckpt-"), said
    assert "starting from step 0" in said and "\n" not in said
    # moved out of the rotation: the new run's checkpoints (lower steps) are not pruned for them
    assert list_checkpoints(tmp_path) == []
    assert len(list(tmp_path.glob(ck.DAMAGED_PREFIX + "ckpt-*"))) == 2
    for step in (1, 2, 3, 4):
        save_checkpoint(tmp_path, _state(step), keep=3)
    assert [s for s, _ in list_checkpoints(tmp_path)] == [4, 3, 2]


def test_a_full_disk_at_the_lock_is_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The lock file's pid is the first write of a start: ENOSPC there was a traceback."""

    class FullDisk:
        def __init__(self, *args: object) -> None:
            self.fh = open(*args)  # closed by the code under test

        def fileno(self) -> int:
            return self.fh.fileno()

        def truncate(self, n: int) -> None:
            self.fh.truncate(n)

        def write(self, data: bytes) -> int:
            raise OSError(28, "No space left on device")

        def flush(self) -> None:
            self.fh.flush()

        def close(self) -> None:
            self.fh.close()

    monkeypatch.setattr(ck, "open", FullDisk, raising=False)
    with pytest.raises(CheckpointError) as info:
        ck.lock_checkpoint_dir(tmp_path / "full")
    text = str(info.value)
    assert text.startswith(f"cannot use checkpoint dir {tmp_path / 'full'}: No space left")
    assert "\n" not in text
    monkeypatch.undo()
    ck.lock_checkpoint_dir(tmp_path / "full").close()  # the failed try held nothing
    ck._held.pop(os.path.realpath(tmp_path / "full"))


def test_failed_write_leaves_previous_checkpoints_intact(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    save_checkpoint(tmp_path, _state(1))

    def boom(src: str, dst: str) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(ck.os, "replace", boom)
    with pytest.raises(CheckpointError, match="No space left"):
        save_checkpoint(tmp_path, _state(2))
    monkeypatch.undo()
    assert sorted(os.listdir(tmp_path)) == [ck.checkpoint_name(1)]  # no temp file left behind
    assert load_latest(tmp_path)["step"] == 1


def test_stray_temp_file_from_a_kill_is_ignored_and_cleaned(tmp_path: Path) -> None:
    save_checkpoint(tmp_path, _state(1))
    stray = tmp_path / (ck._TMP_PREFIX + "abc")
    stray.write_bytes(ck.encode_state(_state(99))[:50])
    assert load_latest(tmp_path)["step"] == 1
    save_checkpoint(tmp_path, _state(2))
    assert not stray.exists()


def test_bad_state_is_refused(tmp_path: Path) -> None:
    with pytest.raises(CheckpointError, match="step"):
        save_checkpoint(tmp_path, {"params": np.zeros(3)})
    with pytest.raises(CheckpointError, match="cannot checkpoint"):
        save_checkpoint(tmp_path, {"step": 1, "x": object()})
    assert list_checkpoints(tmp_path) == []


def test_prune_tolerates_files_it_may_not_delete(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    for step in (1, 2):
        save_checkpoint(tmp_path, _state(step), keep=2)
    stray = tmp_path / (ck._TMP_PREFIX + "old")
    stray.write_bytes(b"x")
    real_unlink = Path.unlink

    def unlink(self: Path, missing_ok: bool = False) -> None:
        if self.name == ck.checkpoint_name(1) or self == stray:
            raise PermissionError(13, "Permission denied")
        real_unlink(self, missing_ok)

    monkeypatch.setattr(Path, "unlink", unlink)
    with caplog.at_level(logging.WARNING, logger="swarmnode.node.train.checkpoint"):
        path = save_checkpoint(tmp_path, _state(3), keep=2)  # must not raise
    assert load_checkpoint(path)["step"] == 3
    assert ck.checkpoint_name(1) in caplog.text and "Permission denied" in caplog.text
    assert stray.name in caplog.text


# --- one process per directory ----------------------------------------------------------------


def test_lock_is_reentrant_in_a_process_and_records_the_pid(tmp_path: Path) -> None:
    d = tmp_path / "new" / "ck"  # created if missing
    first = ck.lock_checkpoint_dir(d)
    assert ck.lock_checkpoint_dir(d) is first  # a peer restarted in-process must not lock out
    assert ck.lock_checkpoint_dir(tmp_path / "new" / "." / "ck") is first
    assert (d / ck.LOCK_FILE).read_text().strip() == str(os.getpid())
    assert list_checkpoints(d) == []  # the lock file is not mistaken for a checkpoint


@pytest.mark.slow
@pytest.mark.timeout(60)
def test_a_second_process_is_refused_until_the_holder_exits(tmp_path: Path) -> None:
    with lock_held_elsewhere(tmp_path) as pid:
        with pytest.raises(CheckpointError) as info:
            ck.lock_checkpoint_dir(tmp_path)
        msg = str(info.value)
        assert f"checkpoint dir {tmp_path} is in use by another swarmnode process" in msg
        assert f"(pid {pid})" in msg and "\n" not in msg
    ck.lock_checkpoint_dir(tmp_path)  # released when its holder exited


def test_lock_on_a_path_that_is_a_file_is_one_line(tmp_path: Path) -> None:
    f = tmp_path / "afile"
    f.write_text("x")
    with pytest.raises(CheckpointError, match="cannot use checkpoint dir") as info:
        ck.lock_checkpoint_dir(f)
    assert "\n" not in str(info.value)
