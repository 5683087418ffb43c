"""Real `swarmnode start` processes on 127.0.0.1 for integration tests, and condition polling."""

from __future__ import annotations

import json
import subprocess
import time
import urllib.request
from pathlib import Path
from typing import Any

from swarmnode.fault.chaos.processes import (
    READY_NAME,
    PeerProcess,
    PeerStartError,
    one_thread_env,
    start_peer,
)
from swarmnode.gossip.auth.operator import OperatorKey
from swarmnode.gossip.wire.control import encode_control

# One BLAS thread per process: several share this (2-core) machine (CLI runs use it too).
ENV = one_thread_env()
FAST = ["--model", "mlp:32", "--eval-every", "50", "--batch-size", "32"]

# The suite's operator: its public half enables the admin routes of every test peer, and every
# admin request a test sends is signed with it (unsigned ones are refused: test_admin_auth.py).
OPERATOR = OperatorKey.generate()


def operator_pub(directory: Path) -> str:
    """Write the suite operator's public key under `directory`; its path (for `admin_key`)."""
    path = directory / "operator.pub"
    if not path.exists():
        path.write_bytes(OPERATOR.public_pem())
    return str(path)


def signed_admin(route: str, body: bytes, addr: str) -> bytes:
    """`body` as an admin request for `route` on the peer at `addr`, signed by the operator."""
    return OPERATOR.sign(route, body, to=addr)


class Peer:
    """One peer process (swarmnode.fault.chaos.processes) started with `--name NAME`; `.addr`
    and `.peer_id` (derived from its key, kept across restarts) once ready."""

    def __init__(
        self, workdir: Path, name: str, *args: str, env: dict[str, str] | None = None
    ) -> None:
        self.name = name
        self.env = env  # the child's whole environment (default: ENV's, one BLAS thread)
        self.workdir = workdir
        self.dir = workdir / name
        self.ready_file = self.dir / READY_NAME
        self.args = args
        self.process: PeerProcess | None = None
        self.addr = ""
        self.peer_id = ""

    @property
    def proc(self) -> subprocess.Popen[bytes] | None:
        return None if self.process is None else self.process.proc

    def start(self, timeout: float = 60.0) -> Peer:
        return self.launch().wait_ready(timeout)

    def launch(self) -> Peer:
        """Start the process without waiting (start several, then `wait_ready` each: a start is
        seconds of imports on a loaded box)."""
        # the id derives from the key kept in ckpt (learnt from the ready file); the name is ours
        self.dir.mkdir(parents=True, exist_ok=True)
        args = ["--checkpoint-dir", str(self.dir / "ckpt"), "--name", self.name,
                "--enable-admin", "--admin-key", operator_pub(self.dir), *FAST, *self.args]  # fmt: skip
        self.process = start_peer(args, self.workdir, self.name, self.env)
        return self

    def wait_ready(self, timeout: float = 60.0) -> Peer:
        assert self.process is not None
        try:
            self.process.wait_ready(time.monotonic() + timeout)
        except PeerStartError as exc:
            raise AssertionError(str(exc)) from None
        self.addr, self.peer_id = self.process.addr, self.process.peer_id
        return self

    def status(self, timeout: float = 2.0) -> dict[str, Any]:
        with urllib.request.urlopen(f"http://{self.addr}/v1/status", timeout=timeout) as r:
            return json.loads(r.read())

    def post(self, route: str, body: bytes, timeout: float = 2.0) -> bytes:
        """POST /v1/{route} (params, admin/slowdown, ...); the answer's body. Admin requests
        are signed by the suite's operator."""
        if route == "params":  # members' only (signed by their keys): tests read as the operator
            route, body = "admin/params", encode_control("params", sender="test")
        if route.startswith("admin/"):
            body = signed_admin(route, body, self.addr)
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
        if self.process is not None:
            self.process.stop(grace=10.0)

    def tail(self, n: int = 15) -> str:
        return "" if self.process is None else self.process.log_tail(n)


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


def set_slowdown(peers: list[Peer], factor: float, step_s: float = 0.0) -> None:
    """Release or pace `peers`: each step x `factor`, and at least `step_s` long (a fixed step
    time: other processes' CPU use does not change it, as long as a step takes less)."""
    body = encode_control("slowdown", sender="test", factor=float(factor), step_s=float(step_s))
    for p in peers:
        p.post("admin/slowdown", body)
