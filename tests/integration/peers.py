"""Real `swarmnode start` processes on 127.0.0.1 for integration tests, and condition polling."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import urllib.request
from pathlib import Path
from typing import Any

from swarmnode.gossip.codec import encode_control

from tests.waiting import wait_for

# One BLAS thread per peer: several peers share this (2-core) machine.
ENV = {**os.environ, "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
FAST = ["--model", "mlp:32", "--eval-every", "50", "--batch-size", "32"]


class Peer:
    """One peer process; `.addr` and `.peer_id` once ready."""

    def __init__(self, workdir: Path, name: str, *args: str) -> None:
        self.name = name
        self.dir = workdir / name
        self.dir.mkdir(parents=True, exist_ok=True)
        self.ready_file = self.dir / "ready.json"
        self.log = open(self.dir / "log.txt", "ab")
        self.args = args
        self.proc: subprocess.Popen[bytes] | None = None
        self.addr = ""
        self.peer_id = ""

    def start(self, timeout: float = 60.0) -> Peer:
        return self.launch().wait_ready(timeout)

    def launch(self) -> Peer:
        """Start the process without waiting (start several, then `wait_ready` each: a start is
        seconds of imports on a loaded box)."""
        self.ready_file.unlink(missing_ok=True)
        cmd = [sys.executable, "-m", "swarmnode", "start", "--listen", "127.0.0.1:0",
               "--ready-file", str(self.ready_file), "--checkpoint-dir", str(self.dir / "ckpt"),
               *FAST, *self.args]  # fmt: skip
        self.proc = subprocess.Popen(cmd, stdout=self.log, stderr=subprocess.STDOUT, env=ENV)
        return self

    def wait_ready(self, timeout: float = 60.0) -> Peer:
        info = wait_for(self._ready, timeout, f"peer {self.name} to be ready")
        self.addr, self.peer_id = info["addr"], info["peer_id"]
        return self

    def _ready(self) -> dict[str, Any] | None:
        if self.proc is not None and self.proc.poll() is not None:
            raise AssertionError(
                f"peer {self.name} exited with {self.proc.returncode}: {self.tail()}"
            )
        if self.ready_file.exists():
            return json.loads(self.ready_file.read_text())
        return None

    def status(self, timeout: float = 2.0) -> dict[str, Any]:
        with urllib.request.urlopen(f"http://{self.addr}/v1/status", timeout=timeout) as r:
            return json.loads(r.read())

    def post(self, route: str, body: bytes, timeout: float = 2.0) -> bytes:
        """POST /v1/{route} (params, admin/slowdown, ...); the answer's body."""
        req = urllib.request.Request(f"http://{self.addr}/v1/{route}", data=body)
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.read()

    def member_state(self, peer: Peer) -> str | None:
        for m in self.status()["members"]:
            if m["peer_id"] == peer.peer_id:
                return m["state"]
        return None

    def signal(self, sig: int) -> None:
        assert self.proc is not None
        self.proc.send_signal(sig)

    def wait_exit(self, timeout: float) -> int:
        assert self.proc is not None
        return self.proc.wait(timeout)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGCONT)
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        self.log.close()

    def tail(self, n: int = 15) -> str:
        lines = (self.dir / "log.txt").read_text(errors="replace").splitlines()
        return "\n".join(lines[-n:])


# A swarm whose peers should train together starts held (a few steps/s) and is released with
# `set_slowdown` once every peer is up: a start is seconds of imports on a loaded box, and the
# founder would otherwise spend its step budget alone meanwhile. Not slower: a new factor takes
# effect only after the pause in progress, (old factor - 1) x one step time.
HOLD = ["--slowdown", "200"]


def start_swarm(workdir: Path, per_peer: list[list[str]], timeout: float = 90.0) -> list[Peer]:
    """Peer p0 founds a swarm; p1.. are launched together and join it. Ready when returned."""
    first = Peer(workdir, "p0", *per_peer[0]).start(timeout)
    rest = [Peer(workdir, f"p{i}", *a, "--join", first.addr) for i, a in enumerate(per_peer[1:], 1)]
    peers = [first, *rest]
    try:
        for p in rest:
            p.launch()
        for p in rest:
            p.wait_ready(timeout)
    except BaseException:
        for p in peers:
            p.stop()
        raise
    return peers


def set_slowdown(peers: list[Peer], factor: float) -> None:
    body = encode_control("slowdown", sender="test", factor=float(factor))
    for p in peers:
        p.post("admin/slowdown", body)
