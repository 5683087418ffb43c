"""A peer's identity: its id and incarnation number, kept in the checkpoint directory.

The id is stable across restarts when a checkpoint directory is given, so a restarted peer is the
same member of the swarm (not a stranger plus a dead twin). Each start bumps the incarnation, so
its fresh heartbeats outrank the tombstone the others keep for its previous life.
"""

from __future__ import annotations

import json
import os
import re
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

from swarmnode.node.train.checkpoint import lock_checkpoint_dir
from swarmnode.node.train.config import check_writable_dir
from swarmnode.node.train.errors import ConfigError

IDENTITY_FILE = "peer.json"
_ID_RE = re.compile(r"^[A-Za-z0-9._-]{1,64}$")


@dataclass(frozen=True)
class Identity:
    peer_id: str
    incarnation: int


def validate_peer_id(peer_id: str) -> str:
    if not _ID_RE.match(peer_id):
        raise ConfigError(f"--peer-id {peer_id!r}: use 1-64 letters, digits, '.', '_' or '-'")
    return peer_id


def load_identity(checkpoint_dir: Path | None, peer_id: str | None = None) -> Identity:
    """The identity for this start; persisted (with the bumped incarnation) if a dir is given.

    Without a directory the incarnation comes from the wall clock in milliseconds, which still
    grows across restarts of a peer started with the same `--peer-id`.
    """
    if peer_id is not None:
        validate_peer_id(peer_id)
    if checkpoint_dir is None:
        return Identity(peer_id or _random_id(), int(time.time() * 1000))
    checkpoint_dir = Path(checkpoint_dir)
    check_writable_dir(checkpoint_dir, "--checkpoint-dir")
    # The first use of the directory by a peer, before anything in it is read or written: a
    # second process on the same directory stops here with the holder's pid.
    lock_checkpoint_dir(checkpoint_dir)
    stored = _read(checkpoint_dir / IDENTITY_FILE)
    if peer_id is None:
        peer_id = stored.get("peer_id") or _random_id()
    previous = stored.get("incarnation", -1) if stored.get("peer_id") == peer_id else -1
    ident = Identity(peer_id, max(int(previous) + 1, int(time.time() * 1000)))
    _write(checkpoint_dir, ident)
    return ident


def _random_id() -> str:
    return uuid.uuid4().hex[:12]


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
