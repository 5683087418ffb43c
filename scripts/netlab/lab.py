"""A lab run: N `python -m swarmnode start` processes, each in its own namespace (net.py),
listening and advertising its own address, joining through peer 0.

The lab watches from the host side of the bridge: it polls each peer's /v1/status and reads
each link's byte counters (the bridge end's rx_bytes is everything the peer sent, headers and
gossip included). `Lab.close()` (also from atexit, and from the CLI's signal handlers) stops the
peers (SIGTERM, then SIGKILL after a grace period) and removes the network.
"""

from __future__ import annotations

import atexit
import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from swarmnode.gossip.auth.operator import OperatorKey
from swarmnode.gossip.wire.control import encode_control

from scripts.netlab.net import LabNet, Link, NetLabError, parse_rate

PORT = 7070
# `hold`: peers start at this slowdown (a step every few seconds to minutes) and are released
# together once all are up, as the integration tests do: otherwise the seed trains alone while
# the others start and sync, and a joiner begins tens of steps behind it.
HOLD_SLOWDOWN = 200.0


def shard_args(peer_args: list[str], i: int, n: int) -> list[str]:
    """`--shard i/n`, unless the peer's own arguments already name a shard."""
    if any(a == "--shard" or a.startswith("--shard=") for a in peer_args):
        return []
    return ["--shard", f"{i}/{n}"]


def step_time(peer_args: list[str]) -> float:
    """The last `--step-time S` (or `--step-time=S`) in a peer's arguments; 0 where none."""
    out = 0.0
    for i, a in enumerate(peer_args):
        if a == "--step-time" and i + 1 < len(peer_args):
            out = float(peer_args[i + 1])
        elif a.startswith("--step-time="):
            out = float(a.split("=", 1)[1])
    return out


@dataclass
class PeerProc:
    index: int
    link: Link
    proc: subprocess.Popen[bytes]
    ready_file: Path
    summary_file: Path
    log_file: Path

    @property
    def addr(self) -> str:
        return f"{self.link.ip}:{PORT}"


@dataclass
class Lab:
    """Start with `start()`; always `close()` (a context manager does)."""

    links: list[str]
    workdir: Path
    peer_args: list[str] = field(default_factory=list)
    slowdowns: list[float] = field(default_factory=list)
    per_peer_args: list[list[str]] = field(default_factory=list)
    # `shards`: peer i trains on `--shard i/N` of the data (each machine with its own data, as in
    # a real swarm); off, every peer trains on the whole set and exchange buys little
    shards: bool = False
    ready_timeout: float = 60.0
    hold: bool = False
    net: LabNet | None = None
    peers: list[PeerProc] = field(default_factory=list)
    t0: float = 0.0
    spawned: dict[int, float] = field(default_factory=dict)  # monotonic time of each start
    operator: OperatorKey | None = None  # signs the release (admin routes are operator-only)

    def __enter__(self) -> Lab:
        try:
            self.start()
        except BaseException:  # a lab that failed to start leaves no bridge behind for the
            self.close()  # next one of this process (its tag is this process's id)
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def start(self) -> None:
        rates = [parse_rate(r) for r in self.links]
        if self.slowdowns and len(self.slowdowns) != len(rates):
            raise NetLabError(f"{len(self.slowdowns)} slowdowns for {len(rates)} links")
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.net = LabNet(rates)
        atexit.register(self.close)
        self.net.create()
        self.t0 = time.monotonic()
        if self.hold:
            self.operator = OperatorKey.generate()
            (self.workdir / "operator.pub").write_bytes(self.operator.public_pem())
        for i, link in enumerate(self.net.links):
            self.spawned[i] = time.monotonic()
            self.peers.append(self._spawn(i, link))
            if i == 0:  # the seed serves before anyone joins through it
                self.wait_ready(self.peers[0])
        for p in self.peers[1:]:
            self.wait_ready(p)
        if self.hold:
            self.release()

    def pace(self, i: int) -> float:
        return self.slowdowns[i] if self.slowdowns else 1.0

    def release(self) -> None:
        """Every peer to its own pace at once; the lab's clock (`elapsed`) starts again here."""
        assert self.operator is not None
        for p in self.peers:
            # the admin route sets both knobs: name the peer's own --step-time, or it is lost
            step_s = step_time(self.peer_args + self._own_args(p.index))
            body = encode_control(
                "slowdown", sender="netlab", factor=self.pace(p.index), step_s=step_s
            )
            signed = self.operator.sign("admin/slowdown", body, to=p.addr)
            req = urllib.request.Request(f"http://{p.addr}/v1/admin/slowdown", data=signed)
            with urllib.request.urlopen(req, timeout=10.0) as resp:
                resp.read()
        self.t0 = time.monotonic()

    def _own_args(self, i: int) -> list[str]:
        return self.per_peer_args[i] if i < len(self.per_peer_args) else []

    def held_s(self, i: int) -> float:
        """How long peer i was held before the release (0 without `hold`)."""
        return max(0.0, self.t0 - self.spawned[i]) if self.hold else 0.0

    def _spawn(self, i: int, link: Link) -> PeerProc:
        d = self.workdir / f"p{i}"
        d.mkdir(parents=True, exist_ok=True)
        ready, summary, log = d / "ready.json", d / "summary.json", d / "peer.log"
        for f in (ready, summary):
            f.unlink(missing_ok=True)
        addr = f"{link.ip}:{PORT}"
        argv = [
            "ip", "netns", "exec", link.ns, sys.executable, "-m", "swarmnode", "start",
            "--listen", addr, "--advertise", addr, "--name", f"p{i}",
            "--ready-file", str(ready), "--summary-json", str(summary),
        ]  # fmt: skip
        if i > 0:
            argv += ["--join", f"{self.net.links[0].ip}:{PORT}"]  # type: ignore[union-attr]
        if self.hold:
            pub = self.workdir / "operator.pub"
            argv += ["--enable-admin", "--admin-key", str(pub), "--slowdown", str(HOLD_SLOWDOWN)]
        elif self.pace(i) != 1:
            argv += ["--slowdown", str(self.pace(i))]
        argv += self.peer_args
        if self.shards:
            argv += shard_args(self.peer_args, i, len(self.net.links))  # type: ignore[union-attr]
        argv += self._own_args(i)
        env = dict(os.environ, PYTHONUNBUFFERED="1")
        with open(log, "wb") as out:
            proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, env=env)
        return PeerProc(i, link, proc, ready, summary, log)

    def wait_ready(self, p: PeerProc) -> None:
        deadline = time.monotonic() + self.ready_timeout
        seed = self.peers[0]
        while not p.ready_file.exists():
            if p is not seed and seed.proc.poll() is not None:
                raise NetLabError(
                    f"the seed p0 exited ({seed.proc.returncode}) before p{p.index} was up: it "
                    "trained its --steps alone; use --hold (peers start together) or more --steps"
                )
            if p.proc.poll() is not None:
                raise NetLabError(f"peer p{p.index} exited ({p.proc.returncode}): {self.tail(p)}")
            if time.monotonic() > deadline:
                raise NetLabError(f"peer p{p.index} not ready after {self.ready_timeout}s")
            time.sleep(0.05)  # polling a file the peer writes, not waiting for time to pass

    def tail(self, p: PeerProc, n: int = 5) -> str:
        try:
            return " | ".join(p.log_file.read_text(errors="replace").strip().splitlines()[-n:])
        except OSError:
            return "(no log)"

    # --- watching ------------------------------------------------------------------------

    def status(self, i: int, timeout: float = 2.0) -> dict[str, Any]:
        url = f"http://{self.peers[i].addr}/v1/status"
        with urllib.request.urlopen(url, timeout=timeout) as resp:
            return json.loads(resp.read())

    def metrics(self, i: int, timeout: float = 2.0) -> str:
        url = f"http://{self.peers[i].addr}/metrics"
        with urllib.request.urlopen(url, timeout=timeout) as resp:
            return resp.read().decode()

    def sent_bytes(self, i: int) -> int:
        """Bytes peer i put on its link (the bridge end's receive counter)."""
        host_end = self.peers[i].link.host_end
        return int(Path(f"/sys/class/net/{host_end}/statistics/rx_bytes").read_text())

    def elapsed(self) -> float:
        return time.monotonic() - self.t0

    def running(self) -> list[int]:
        return [p.index for p in self.peers if p.proc.poll() is None]

    # --- links ---------------------------------------------------------------------------

    def cut(self, i: int) -> None:
        self.net.cut(i)  # type: ignore[union-attr]

    def restore(self, i: int) -> None:
        self.net.restore(i)  # type: ignore[union-attr]

    # --- the end -------------------------------------------------------------------------

    def wait_exit(self, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        for p in self.peers:
            try:
                p.proc.wait(timeout=max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                return False
        return True

    def summaries(self) -> list[dict[str, Any] | None]:
        out: list[dict[str, Any] | None] = []
        for p in self.peers:
            try:
                out.append(json.loads(p.summary_file.read_text()))
            except (OSError, ValueError):
                out.append(None)
        return out

    def close(self, grace: float = 6.0) -> None:
        self.stop_peers(grace)
        if self.net is not None:
            self.net.teardown()
        atexit.unregister(self.close)

    def stop_peers(self, grace: float = 6.0) -> None:
        """SIGTERM every peer (they leave, write their summary), SIGKILL after `grace`."""
        for p in self.peers:
            if p.proc.poll() is None:
                p.proc.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + grace
        for p in self.peers:
            try:
                p.proc.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                p.proc.kill()
                p.proc.wait()
