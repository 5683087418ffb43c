"""Crash-safe checkpoints: atomic writes, corruption detection, keep-last-K, fallback on load.

File layout (`ckpt-<step>.swck`):

    8 bytes   magic  b"SWNCKPT1"
    8 bytes   payload length (little-endian uint64)
    32 bytes  sha256 of the payload
    payload   an uncompressed .npz: every array of the state, plus `__meta__` (UTF-8 JSON of the
              non-array parts, with each array replaced by {"__array__": key})

A write goes to a temp file in the same directory, is flushed and fsync'ed, renamed over the final
name with `os.replace` (atomic on POSIX), and the directory is fsync'ed so the rename itself
survives a power cut. A process killed at any moment therefore leaves either the previous set of
checkpoints or the new one, never a half-written `ckpt-*` file; the header still catches files
damaged later (disk errors, a copy cut short), and `load_latest` then falls back to the previous
checkpoint instead of refusing to start.

One peer per directory: the directory is also where the peer keeps its identity (`peer.json`,
written by the peer service), which this module never touches. `lock_checkpoint_dir` enforces it
with an exclusive `flock` held for the life of the process: two processes sharing a directory
would resume from and prune each other's files (a prune would delete the other's in-flight temp
file). The kernel drops the lock when the process dies, SIGKILL included, so a crash never leaves
a directory locked.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import logging
import os
import re
import struct
import tempfile
import threading
from pathlib import Path
from typing import IO, Any

import numpy as np
from swarmnode.node.train.errors import CheckpointError

log = logging.getLogger(__name__)

MAGIC = b"SWNCKPT1"
_HEADER = struct.Struct("<8sQ32s")
DEFAULT_KEEP = 3
_NAME_RE = re.compile(r"^ckpt-(\d{12})\.swck$")
_TMP_PREFIX = ".ckpt-tmp-"
LOCK_FILE = ".swarmnode.lock"
DAMAGED_PREFIX = "damaged-"  # a checkpoint that failed its check, renamed out of the rotation

try:
    import fcntl
except ImportError:  # not POSIX (Windows): no advisory locks; one peer per dir is on the user
    fcntl = None  # type: ignore[assignment]

# Locks this process holds, by real path. Re-locking a directory this process already holds
# returns the same handle: a peer restarted inside one process (tests, an embedding app) must
# not lock itself out, and flock would refuse a second open file description.
_held: dict[str, IO[bytes]] = {}
_held_guard = threading.Lock()


def checkpoint_name(step: int) -> str:
    return f"ckpt-{step:012d}.swck"


def list_checkpoints(directory: str | Path) -> list[tuple[int, Path]]:
    """(step, path) of every checkpoint file in `directory`, newest (highest step) first."""
    d = Path(directory)
    if not d.is_dir():
        return []
    found = []
    for p in d.iterdir():
        m = _NAME_RE.match(p.name)
        if m:
            found.append((int(m.group(1)), p))
    return sorted(found, reverse=True)


def save_checkpoint(directory: str | Path, state: dict[str, Any], keep: int = DEFAULT_KEEP) -> Path:
    """Write `state` (must hold an int `step`) atomically; prune to the newest `keep` files."""
    if keep < 1:
        raise CheckpointError(f"keep must be >= 1, got {keep}")
    step = state.get("step")
    if not isinstance(step, (int, np.integer)) or step < 0:
        raise CheckpointError(f"checkpoint state needs a non-negative int 'step', got {step!r}")
    d = Path(directory)
    try:
        d.mkdir(parents=True, exist_ok=True)
        final = d / checkpoint_name(int(step))
        _atomic_write(final, encode_state(state))
    except OSError as exc:
        raise CheckpointError(f"cannot write checkpoint in {d}: {exc.strerror or exc}") from None
    try:
        _prune(d, keep)
    except OSError as exc:  # listing the directory failed: the new file is safe, pruning waits
        log.warning("cannot prune checkpoints in %s: %s", d, exc.strerror or exc)
    return final


def load_checkpoint(path: str | Path) -> dict[str, Any]:
    """Read and verify one checkpoint file; `CheckpointError` if it is damaged or unreadable."""
    p = Path(path)
    try:
        raw = p.read_bytes()
    except OSError as exc:
        raise CheckpointError(f"cannot read checkpoint {p}: {exc.strerror or exc}") from None
    try:
        return decode_state(raw)
    except CheckpointError as exc:
        raise CheckpointError(f"{p.name}: {exc}") from None


def load_latest(directory: str | Path) -> dict[str, Any] | None:
    """The newest readable checkpoint in `directory`, or None if there is none.

    A damaged file is skipped: losing a few steps beats refusing to start. The skipped ones are
    renamed `damaged-ckpt-*` (kept for a look, out of the rotation: left as they were, a run
    that starts again below their step would see its new checkpoints pruned as the oldest),
    and one WARNING says what was skipped and where the run starts.
    """
    damaged: list[str] = []
    state = None
    for _, path in list_checkpoints(directory):
        try:
            state = load_checkpoint(path)
        except CheckpointError as exc:
            damaged.append(str(exc))
            with contextlib.suppress(OSError):  # a read-only copy: skipped again next time
                path.rename(path.with_name(DAMAGED_PREFIX + path.name))
            continue
        state["_path"] = str(path)
        break
    if damaged:
        _warn_damaged(directory, damaged, state)
    return state


def _warn_damaged(directory: str | Path, damaged: list[str], state: dict | None) -> None:
    n = len(damaged)
    if state is None:
        what = "the checkpoint" if n == 1 else f"all {n} checkpoints"
        start = "starting from step 0"
    else:
        what = "1 checkpoint" if n == 1 else f"{n} checkpoints"
        start = f"resuming from the newest readable one, step {state['step']}"
    log.warning(
        "%s in %s %s damaged (newest: %s): %s; moved aside as %s*",
        what,
        directory,
        "is" if n == 1 else "are",
        damaged[0],
        start,
        DAMAGED_PREFIX,
    )


def lock_checkpoint_dir(directory: str | Path) -> IO[bytes]:
    """Lock `directory` (created if missing) for this process until it exits; return the handle.

    `CheckpointError` if another process holds it, naming that process's pid.
    """
    d = Path(directory)
    try:
        d.mkdir(parents=True, exist_ok=True)
        key = os.path.realpath(d)
    except OSError as exc:
        raise CheckpointError(f"cannot use checkpoint dir {d}: {exc.strerror or exc}") from None
    with _held_guard:
        if key not in _held:
            _held[key] = _acquire(d)
        return _held[key]


def _acquire(d: Path) -> IO[bytes]:
    try:
        fh = open(d / LOCK_FILE, "a+b")  # no `with`: held open for the life of the process
    except OSError as exc:
        raise CheckpointError(f"cannot lock checkpoint dir {d}: {exc.strerror or exc}") from None
    if fcntl is None:
        return fh
    try:
        fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as exc:
        fh.close()
        if isinstance(exc, BlockingIOError):
            raise CheckpointError(
                f"checkpoint dir {d} is in use by another swarmnode process "
                f"(pid {_holder_pid(d)}); give each peer its own --checkpoint-dir"
            ) from None
        raise CheckpointError(f"cannot lock checkpoint dir {d}: {exc.strerror or exc}") from None
    # The pid is for the message a second process prints; the lock itself is the flock.
    try:
        fh.truncate(0)
        fh.write(f"{os.getpid()}\n".encode())
        fh.flush()
    except OSError as exc:  # a full disk: the first write of a start, one line and exit 2
        fh.close()
        raise CheckpointError(
            f"cannot use checkpoint dir {d}: {exc.strerror or exc} (free some space, or give "
            "another --checkpoint-dir)"
        ) from None
    return fh


def _holder_pid(d: Path) -> str:
    try:
        text = (d / LOCK_FILE).read_text().strip()
    except OSError:
        return "unknown"
    return text if text.isascii() and text.isdigit() else "unknown"


# --- encoding -------------------------------------------------------------------------------


def encode_state(state: dict[str, Any]) -> bytes:
    """Serialise a nested dict of arrays and JSON scalars into the checksummed format."""
    arrays: dict[str, np.ndarray] = {}
    meta = _pack(state, "s", arrays)
    arrays["__meta__"] = np.frombuffer(json.dumps(meta).encode(), dtype=np.uint8)
    buf = io.BytesIO()
    np.savez(buf, **arrays)
    payload = buf.getvalue()
    return _HEADER.pack(MAGIC, len(payload), hashlib.sha256(payload).digest()) + payload


def decode_state(raw: bytes) -> dict[str, Any]:
    if len(raw) < _HEADER.size:
        raise CheckpointError(f"truncated: {len(raw)} bytes is shorter than the header")
    magic, length, digest = _HEADER.unpack_from(raw)
    if magic != MAGIC:
        raise CheckpointError("not a swarmnode checkpoint (bad magic)")
    payload = memoryview(raw)[_HEADER.size :]
    if len(payload) != length:
        raise CheckpointError(f"truncated: payload is {len(payload)} bytes, header says {length}")
    if hashlib.sha256(payload).digest() != digest:
        raise CheckpointError("corrupted: sha256 of the payload does not match the header")
    try:
        with np.load(io.BytesIO(payload), allow_pickle=False) as npz:
            arrays = {k: npz[k] for k in npz.files}
        meta = json.loads(arrays.pop("__meta__").tobytes().decode())
        state = _unpack(meta, arrays)
    except (ValueError, KeyError, OSError, UnicodeDecodeError) as exc:
        # The checksum matched, so this is a file from an incompatible writer, not bit rot.
        raise CheckpointError(f"unreadable payload ({type(exc).__name__}: {exc})") from None
    if not isinstance(state, dict):
        raise CheckpointError("unreadable payload: top level is not a mapping")
    return state


def _pack(obj: Any, path: str, arrays: dict[str, np.ndarray]) -> Any:
    if isinstance(obj, np.ndarray):
        key = f"a{len(arrays)}"
        arrays[key] = np.ascontiguousarray(obj)
        return {"__array__": key}
    if isinstance(obj, dict):
        if "__array__" in obj:
            raise CheckpointError(f"{path}: key '__array__' is reserved")
        out = {}
        for k, v in obj.items():
            if not isinstance(k, str):
                raise CheckpointError(f"{path}: dict keys must be str, got {type(k).__name__}")
            out[k] = _pack(v, f"{path}.{k}", arrays)
        return out
    if isinstance(obj, (list, tuple)):
        return [_pack(v, f"{path}[{i}]", arrays) for i, v in enumerate(obj)]
    if isinstance(obj, np.generic):
        return obj.item()
    if obj is None or isinstance(obj, (bool, int, float, str)):
        return obj
    raise CheckpointError(f"{path}: cannot checkpoint a {type(obj).__name__}")


def _unpack(obj: Any, arrays: dict[str, np.ndarray]) -> Any:
    if isinstance(obj, dict):
        if set(obj) == {"__array__"}:
            return arrays[obj["__array__"]]
        return {k: _unpack(v, arrays) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_unpack(v, arrays) for v in obj]
    return obj


# --- files ----------------------------------------------------------------------------------


def _atomic_write(final: Path, data: bytes) -> None:
    fd, tmp = tempfile.mkstemp(prefix=_TMP_PREFIX, dir=final.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, final)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    _fsync_dir(final.parent)


def _fsync_dir(d: Path) -> None:
    # Makes the rename durable. Not all platforms can open a directory (Windows): best effort.
    try:
        fd = os.open(d, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _prune(d: Path, keep: int) -> None:
    # Best effort: the new checkpoint is already durable, so a file we may not delete (a
    # read-only copy, another user's file) is logged, never a reason to fail the save.
    for _, old in list_checkpoints(d)[keep:]:
        _remove(old, "old checkpoint")
    # Temp files are left behind only by a process killed mid-write: the directory lock
    # (`lock_checkpoint_dir`) keeps any other live writer out, so nobody else owns them.
    for p in d.glob(_TMP_PREFIX + "*"):
        _remove(p, "stale temp file")


def _remove(path: Path, what: str) -> None:
    try:
        path.unlink()
    except FileNotFoundError:
        pass
    except OSError as exc:
        log.warning("cannot remove %s %s: %s", what, path, exc.strerror or exc)
