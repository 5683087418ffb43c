"""Start one `swarmnode start` peer process and wait for its ready file.

The one way every driver from outside starts a real peer (the chaos runner, the integration
tests' tests/integration/peers.py, the benchmark scripts): a free port (`--listen 127.0.0.1:0`),
a ready file the peer writes once it serves (`--ready-file`, `{"addr", "peer_id", "name", ...}`), its
output in a log file, and one BLAS thread, since several peers share a few cores.

    p = start_peer(["--model", "mlp:32"], workdir, "p0")     # returns at once
    p.wait_ready(time.monotonic() + 60)                      # p.addr, p.peer_id are set
    ...
    p.stop()
"""

from __future__ import annotations

import contextlib
import ctypes
import dataclasses
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from swarmnode.kernels.errors import SwarmnodeError

START_COMMAND = (sys.executable, "-m", "swarmnode", "start")
ONE_THREAD = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")
READY_NAME = "ready.json"

try:  # prctl(PR_SET_PDEATHSIG) from the child; resolved here, not after fork
    _LIBC: Any = ctypes.CDLL(None, use_errno=True) if sys.platform.startswith("linux") else None
except OSError:  # pragma: no cover
    _LIBC = None


class PeerStartError(SwarmnodeError):
    """A peer exited before it was ready, or was not ready by the deadline."""


def one_thread_env(
    base: Mapping[str, str] | None = None, *, keep_set: bool = False
) -> dict[str, str]:
    """`base` (default: this process's environment) with one BLAS thread per peer: N peers on a
    few cores would thrash them with threaded BLAS. `keep_set` keeps a value already in `base`."""
    env = dict(os.environ if base is None else base)
    for var in ONE_THREAD:
        if not (keep_set and var in env):
            env[var] = "1"
    return env


def read_ready(path: Path) -> dict[str, Any] | None:
    """The ready file's content once it names an address; None before."""
    try:
        info = json.loads(path.read_text())
    except (OSError, ValueError):  # absent, or caught between write and rename
        return None
    return info if isinstance(info, dict) and info.get("addr") else None


@dataclasses.dataclass
class PeerProcess:
    """One started peer process. `addr` and `peer_id` are set once it is ready: the id derives
    from the peer's key (kept in its checkpoint dir), so only the ready file tells it."""

    name: str
    dir: Path
    argv: list[str]
    proc: subprocess.Popen[bytes]
    log_path: Path
    ready_file: Path
    addr: str = ""
    peer_id: str = ""

    @property
    def pid(self) -> int:
        return self.proc.pid

    def alive(self) -> bool:
        return self.proc.poll() is None

    def poll_ready(self) -> dict[str, Any] | None:
        """The ready file's content if it is there (and `addr`, `peer_id` taken from it)."""
        info = read_ready(self.ready_file)
        if info is not None:
            self.addr, self.peer_id = str(info["addr"]), str(info.get("peer_id"))
        return info

    def wait_ready(self, deadline: float, poll: float = 0.05) -> PeerProcess:
        """Block until the ready file is there; `deadline` is a `time.monotonic()` value.
        `PeerStartError` (with the log's tail) if the process exits first or time runs out."""
        while self.poll_ready() is None:
            if not self.alive():
                raise PeerStartError(
                    f"peer {self.name} exited with {self.proc.returncode} before it was ready:\n"
                    f"{self.log_tail()}"
                )
            if time.monotonic() > deadline:
                raise PeerStartError(f"peer {self.name} not ready in time:\n{self.log_tail()}")
            time.sleep(poll)
        return self

    def log_lines(self, n: int = 15) -> list[str]:
        """The last `n` lines of its log (none if there is no log yet)."""
        try:
            return self.log_path.read_text(errors="replace").splitlines()[-n:]
        except OSError:
            return []

    def log_tail(self, n: int = 15) -> str:
        return "\n".join(self.log_lines(n)) or "(no output)"

    def send(self, sig: int) -> None:
        """Send `sig` if the process is still there (it may have exited meanwhile)."""
        if self.alive():
            with contextlib.suppress(ProcessLookupError):
                self.proc.send_signal(sig)

    def stop(self, grace: float = 10.0) -> int | None:
        """SIGCONT (a frozen peer cannot leave) + SIGTERM, SIGKILL after `grace` s; the exit code."""
        if self.alive():
            self.send(signal.SIGCONT)
            self.send(signal.SIGTERM)
            try:
                self.proc.wait(grace)
            except subprocess.TimeoutExpired:
                self.proc.kill()
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(5)
        return self.proc.returncode


def start_peer(
    args: Sequence[str],
    workdir: Path,
    name: str,
    env: Mapping[str, str] | None = None,
    *,
    command: Sequence[str] = START_COMMAND,
    log_name: str = "log.txt",
    cwd: Path | None = None,
    supervised: bool = False,
) -> PeerProcess:
    """Start `command --listen 127.0.0.1:0 --ready-file DIR/ready.json *args` in DIR =
    `workdir/name`, output appended to DIR/`log_name`; returns at once (start several, then
    `wait_ready` each: a start is seconds of imports on a loaded box).

    `env` is the child's whole environment (default: this one with one BLAS thread).
    `supervised` puts the child in its own session (a Ctrl-C in the terminal reaches only the
    driver, which then stops its peers in order) and, on Linux, kills it when the driver dies.
    """
    peer_dir = Path(workdir) / name
    peer_dir.mkdir(parents=True, exist_ok=True)
    ready_file = peer_dir / READY_NAME
    ready_file.unlink(missing_ok=True)  # a stale one would read as ready at once
    log_path = peer_dir / log_name
    argv = [*command, "--listen", "127.0.0.1:0", "--ready-file", str(ready_file), *args]
    extra: dict[str, Any] = {}
    if supervised:
        # preexec_fn does one prctl call: safe between fork and exec
        extra = {"start_new_session": True, "preexec_fn": _die_with_parent}
    with open(log_path, "ab") as log:  # the child keeps its own copy of the descriptor
        proc = subprocess.Popen(
            argv,
            cwd=cwd,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            env=one_thread_env() if env is None else dict(env),
            **extra,
        )
    return PeerProcess(name, peer_dir, argv, proc, log_path, ready_file)


def _die_with_parent() -> None:  # runs in the child between fork and exec
    if _LIBC is not None:
        _LIBC.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG = 1
