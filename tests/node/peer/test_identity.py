"""Peer identity in the checkpoint directory: stable id, growing incarnation, start-up errors."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from swarmnode.gossip.auth.peer_key import PeerKey, peer_id_of
from swarmnode.node.peer import identity
from swarmnode.node.peer.identity import load_identity
from swarmnode.node.settings import PeerConfig
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


# --- the key (issue 10): created 0600, kept, checked -------------------------------------------


@pytest.mark.timeout(30)
def test_key_file_is_created_0600_and_keeps_the_id(tmp_path: Path) -> None:
    d = tmp_path / "ck"
    first = load_identity(d)
    key_file = d / identity.KEY_FILE
    assert key_file.stat().st_mode & 0o777 == 0o600
    again = load_identity(d)  # a restart with the same --checkpoint-dir: same key, same id
    assert again.key.public == first.key.public and again.peer_id == first.peer_id
    assert peer_id_of(first.key.public) == first.peer_id


@pytest.mark.timeout(30)
def test_a_key_file_readable_by_others_is_refused(tmp_path: Path) -> None:
    d = tmp_path / "ck"
    load_identity(d)
    os.chmod(d / identity.KEY_FILE, 0o644)
    with pytest.raises(ConfigError, match="readable by others: chmod 600"):
        load_identity(d)


@pytest.mark.timeout(30)
def test_a_damaged_key_file_is_refused_not_replaced(tmp_path: Path) -> None:
    d = tmp_path / "ck"
    load_identity(d)
    (d / identity.KEY_FILE).write_text("not hex\n")
    with pytest.raises(ConfigError, match="is not a peer key"):
        load_identity(d)
    assert (d / identity.KEY_FILE).read_text() == "not hex\n"


@pytest.mark.timeout(30)
def test_peer_id_is_only_a_check_of_the_keys_id(tmp_path: Path) -> None:
    d = tmp_path / "ck"
    mine = load_identity(d).peer_id
    assert load_identity(d, mine).peer_id == mine
    with pytest.raises(ConfigError, match=r"--peer-id 'p1' does not match the key in") as info:
        load_identity(d, "p1")
    assert mine in str(info.value) and "\n" not in str(info.value)
    with pytest.raises(ConfigError, match="does not match a fresh key"):
        load_identity(None, "p1")
    with pytest.raises(ConfigError, match="use 1-64 letters"):
        load_identity(d, "bad id!")


@pytest.mark.timeout(30)
def test_name_is_checked_and_free_to_choose() -> None:
    assert PeerConfig(name="worker-1.a_b").validate().name == "worker-1.a_b"
    for bad in ("", "has space", "x" * 65, "é"):
        with pytest.raises(ConfigError, match="`name`"):
            PeerConfig(name=bad).validate()


# --- the trust file ----------------------------------------------------------------------------


@pytest.mark.timeout(30)
def test_trust_file_takes_keys_comments_and_blank_lines(tmp_path: Path) -> None:
    keys = [PeerKey.generate() for _ in range(2)]
    f = tmp_path / "trust"
    f.write_text(f"# the swarm\n{keys[0].public_hex}  # a\n\n  {keys[1].public_hex.upper()}\n")
    assert identity.read_trust_file(str(f)) == [k.public for k in keys]


@pytest.mark.timeout(30)
@pytest.mark.parametrize(
    ("text", "line"),
    [
        ("abc\n", 1),
        (f"{'0' * 64}\n{'0' * 63}\n", 2),
        (f"# ok\n{'0' * 64}\n{'g' * 64}\n", 3),
        (f"{'0' * 64} {'1' * 64}\n", 1),  # two keys on one line
    ],
)
def test_a_bad_trust_line_is_an_error_naming_the_line(tmp_path: Path, text: str, line: int) -> None:
    f = tmp_path / "trust"
    f.write_text(text)
    with pytest.raises(
        ConfigError, match=rf"--trust '.*trust' line {line}: a public key is 64 hex"
    ):
        identity.read_trust_file(str(f))


@pytest.mark.timeout(30)
def test_an_empty_or_missing_trust_file_is_an_error(tmp_path: Path) -> None:
    f = tmp_path / "trust"
    f.write_text("# nobody\n\n")
    with pytest.raises(ConfigError, match="lists no key"):
        identity.read_trust_file(str(f))
    with pytest.raises(ConfigError, match="No such file"):
        identity.read_trust_file(str(tmp_path / "absent"))
