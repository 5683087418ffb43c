"""A peer's identity: its Ed25519 key (hence its id) and incarnation, kept in the checkpoint dir.

The key is created on the first start and kept in `peer.key` (mode 0600) in the checkpoint
directory, so a restarted peer is the same member of the swarm (not a stranger plus a dead twin);
without a directory each process has an ephemeral key. The peer id is derived from the public key
(`swarmnode.gossip.auth.peer_key.peer_id_of`), so `--peer-id` can no longer choose it: it is accepted
only as a check that the key is the one expected, and refused otherwise. Each start bumps the
incarnation, so its fresh heartbeats outrank the tombstone the others keep for its previous life.
"""

from __future__ import annotations

import json
import logging
import os
import re
import time
from dataclasses import dataclass
from pathlib import Path

from swarmnode.gossip.auth import KEY_FILE, PeerKey, parse_public_key
from swarmnode.gossip.errors import PeerKeyError
from swarmnode.node.train import (
    ConfigError,
    check_writable_dir,
    list_checkpoints,
    lock_checkpoint_dir,
)

log = logging.getLogger(__name__)

IDENTITY_FILE = "peer.json"
_ID_RE = re.compile(r"^[A-Za-z0-9._-]{1,64}$")


@dataclass(frozen=True)
class Identity:
    peer_id: str
    incarnation: int
    key: PeerKey


def validate_peer_id(peer_id: str) -> str:
    if not _ID_RE.match(peer_id):
        raise ConfigError(f"--peer-id {peer_id!r}: use 1-64 letters, digits, '.', '_' or '-'")
    return peer_id


def load_identity(checkpoint_dir: Path | None, peer_id: str | None = None) -> Identity:
    """The identity for this start; key and bumped incarnation persisted if a dir is given.

    Without a directory the key is ephemeral and the incarnation comes from the wall clock in
    milliseconds. A `peer_id` that is not the key's id is refused (ConfigError).
    """
    if peer_id is not None:
        validate_peer_id(peer_id)
    if checkpoint_dir is None:
        key = PeerKey.generate()
        _check_expected(peer_id, key, None)
        return Identity(key.peer_id, int(time.time() * 1000), key)
    checkpoint_dir = Path(checkpoint_dir)
    check_writable_dir(checkpoint_dir, "--checkpoint-dir")
    # The first use of the directory by a peer, before anything in it is read or written: a
    # second process on the same directory stops here with the holder's pid.
    lock_checkpoint_dir(checkpoint_dir)
    key = _load_or_create_key(checkpoint_dir)
    _check_expected(peer_id, key, checkpoint_dir)
    stored = _read(checkpoint_dir / IDENTITY_FILE)
    previous = stored.get("incarnation", -1) if stored.get("peer_id") == key.peer_id else -1
    ident = Identity(key.peer_id, max(int(previous) + 1, int(time.time() * 1000)), key)
    _write(checkpoint_dir, ident)
    return ident


def _check_expected(peer_id: str | None, key: PeerKey, directory: Path | None) -> None:
    if peer_id is None or peer_id == key.peer_id:
        return
    where = f"the key in {str(directory)!r}" if directory else "a fresh key (no --checkpoint-dir)"
    raise ConfigError(
        f"--peer-id {peer_id!r} does not match {where}, whose id is {key.peer_id!r}: a peer id "
        "is derived from the peer's key; drop --peer-id or give the directory of that key"
    )


def _load_or_create_key(directory: Path) -> PeerKey:
    path = directory / KEY_FILE
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        key = PeerKey.generate()
        _warn_if_a_new_identity_replaces_one(directory, key)
        try:
            directory.mkdir(parents=True, exist_ok=True)
            # created 0600 from the start: the private key is never readable by others
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "wb") as fh:
                fh.write(key.key_file_text())
                fh.flush()
                os.fsync(fh.fileno())
        except OSError as exc:
            raise ConfigError(
                f"--checkpoint-dir {str(directory)!r}: cannot write {KEY_FILE}: "
                f"{exc.strerror or exc}"
            ) from None
        return key
    except OSError as exc:
        raise ConfigError(f"cannot read {path}: {exc.strerror or exc}") from None
    if path.stat().st_mode & 0o077:
        raise ConfigError(f"{path} is readable by others: chmod 600 it (it is a private key)")
    try:
        return PeerKey.from_private_bytes(bytes.fromhex(raw.decode("ascii").strip()))
    except (ValueError, UnicodeDecodeError) as exc:
        # never start as someone new silently: the operator must decide about a damaged key
        raise ConfigError(
            f"{path} is not a peer key ({exc}); move it away to get a new id"
        ) from None


def _warn_if_a_new_identity_replaces_one(directory: Path, key: PeerKey) -> None:
    """A directory with checkpoints (or a `peer.json`) but no `peer.key` had an identity that
    is lost: say so once. Not refused: the checkpoints still hold the model, and a restart
    by a service manager should not stop for good over a lost key; but the swarm now sees a
    stranger, and a `--trust` swarm refuses it until its new public key is listed."""
    old = _read(directory / IDENTITY_FILE).get("peer_id")
    if old is None and not list_checkpoints(directory):
        return  # a first start
    was = f" (was {old})" if isinstance(old, str) else ""
    log.warning(
        "no %s in %s, which holds an earlier run's state: made a new identity %s%s; the swarm "
        "sees a new member and the old id dead, and a --trust swarm must list the new public "
        "key %s",
        KEY_FILE,
        directory,
        key.peer_id,
        was,
        key.public_hex,
    )


def read_trust_file(path: str) -> list[bytes]:
    """The public keys of a `--trust` file: one 64-hex-digit key per line, '#' comments."""
    try:
        lines = Path(path).read_text().splitlines()
    except OSError as exc:
        raise ConfigError(f"--trust {path!r}: {exc.strerror or exc}") from None
    keys = []
    for number, line in enumerate(lines, 1):
        text = line.split("#", 1)[0].strip()
        if text:
            try:
                keys.append(parse_public_key(text))
            except PeerKeyError as exc:
                raise ConfigError(f"--trust {path!r} line {number}: {exc}") from None
    if not keys:
        raise ConfigError(f"--trust {path!r} lists no key")
    return keys


def _read(path: Path) -> dict:
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        return {}
    except (OSError, ValueError):
        return {}  # unreadable identity: start as a new peer rather than refuse to start
    return data if isinstance(data, dict) else {}


def _write(directory: Path, ident: Identity) -> None:
    tmp = directory / f".{IDENTITY_FILE}.tmp"
    try:
        directory.mkdir(parents=True, exist_ok=True)
        tmp.write_text(json.dumps({"peer_id": ident.peer_id, "incarnation": ident.incarnation}))
        with open(tmp, "rb+") as fh:
            os.fsync(fh.fileno())
        os.replace(tmp, directory / IDENTITY_FILE)
    except OSError as exc:  # a full disk or a read-only mount: one line at start, not a traceback
        raise ConfigError(
            f"--checkpoint-dir {str(directory)!r}: cannot write {IDENTITY_FILE}: "
            f"{exc.strerror or exc}"
        ) from None
