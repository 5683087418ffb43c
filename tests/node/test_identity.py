"""Peer identity in the checkpoint directory: stable id, growing incarnation, start-up errors."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from swarmnode.node.peer import identity
from swarmnode.node.peer.identity import load_identity
from swarmnode.node.train import checkpoint as ck
from swarmnode.node.train.errors import ConfigError


def test_id_is_stable_and_incarnation_grows_and_the_dir_is_locked(tmp_path: Path) -> None:
    d = tmp_path / "ck"
    first = load_identity(d)
    second = load_identity(d)  # same process (a restart inside it): the lock is re-entrant
    assert second.peer_id == first.peer_id and second.incarnation > first.incarnation
    assert (d / ck.LOCK_FILE).read_text().strip() == str(os.getpid())


def test_checkpoint_dir_that_is_a_file_is_a_config_error(tmp_path: Path) -> None:
    f = tmp_path / "afile"
    f.write_text("x")
    with pytest.raises(ConfigError, match="exists and is not a directory") as info:
        load_identity(f)
    assert "\n" not in str(info.value)


def test_unwritable_checkpoint_dir_is_a_config_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # os.access stands in for a read-only directory: as root, permissions alone would not stop us.
    monkeypatch.setattr("swarmnode.node.train.config.os.access", lambda path, mode: False)
    with pytest.raises(ConfigError, match="is not writable"):
        load_identity(tmp_path / "ck")


def test_failed_identity_write_is_a_config_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def full(src: object, dst: object) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(identity.os, "replace", full)
    with pytest.raises(ConfigError, match=r"cannot write peer\.json: No space left") as info:
        load_identity(tmp_path / "ck")
    assert "\n" not in str(info.value)
