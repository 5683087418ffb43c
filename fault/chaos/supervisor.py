"""Process supervision for a chaos run: every scenario peer across its (re)starts.

The supervisor starts peers (swarmnode.fault.chaos.processes, supervised: their own session and
a parent-death signal, so even a SIGKILLed runner leaves no orphans), waits for their ready
files, signals them for the timeline's lifecycle events, notices the ones that died on their
own, and at the end stops every process it started -- SIGTERM, then SIGKILL after the grace.

The swarm secret is handed to every child through `SWARMNODE_SECRET` and removed from their
environment when there is none, so a secret in the runner's shell can never make the peers
refuse the runner's unsigned requests.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import os
import signal
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path

from swarmnode.fault.chaos.errors import ChaosError
from swarmnode.fault.chaos.processes import PeerProcess, one_thread_env, start_peer
from swarmnode.fault.chaos.scenario import PeerSpec, Scenario, flag_argv
from swarmnode.gossip.auth import KEY_FILE, PeerKey

SECRET_VAR = "SWARMNODE_SECRET"  # what `swarmnode start` reads when --secret is not given
LOG_TAIL_LINES = 6


@dataclasses.dataclass
class ScenarioPeer:
    """One scenario peer across its (re)starts: the history the report keeps."""

    spec: PeerSpec
    workdir: Path
    current: PeerProcess | None = None
    state: str = "absent"  # absent | starting | running | frozen | down
    addr: str | None = None
    peer_id: str | None = None
    expected_exit: bool = False
    peer_ids: list[str] = dataclasses.field(default_factory=list)
    addrs: list[str] = dataclasses.field(default_factory=list)
    pids: list[int] = dataclasses.field(default_factory=list)
    exit_codes: list[int | None] = dataclasses.field(default_factory=list)
    logs: list[str] = dataclasses.field(default_factory=list)
    # per start: where the peer writes its own final figures as it stops (`--summary-json`);
    # a start that was killed writes none
    summaries: list[str] = dataclasses.field(default_factory=list)
    argv: list[str] = dataclasses.field(default_factory=list)  # of the latest start

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def proc(self) -> subprocess.Popen[bytes] | None:
        return None if self.current is None else self.current.proc

    @property
    def checkpoint_dir(self) -> Path:
        return self.workdir / "ckpt"

    def alive(self) -> bool:
        return self.current is not None and self.current.alive()

    def signal(self, sig: int) -> None:
        if self.current is not None:
            self.current.send(sig)

    def log_tail(self) -> str:
        """The last lines of the latest log on one line (for a timeline entry or an error)."""
        if self.current is None:
            return ""
        lines = self.current.log_lines(LOG_TAIL_LINES)
        return " | ".join(line.strip() for line in lines if line.strip())


class Supervisor:
    """The peer processes of one scenario; `command` is the argv prefix that starts a peer."""

    def __init__(
        self,
        scenario: Scenario,
        report_dir: Path,
        command: Sequence[str],
        secret: str | None,
        operator_pem: bytes | None = None,
    ) -> None:
        self.scenario = scenario
        self.command = list(command)
        self.secret = secret
        self.operator_pem = operator_pem  # the run's operator public key: admin routes on
        self.peers_dir = report_dir / "peers"
        self.peers = {p.name: ScenarioPeer(p, self.peers_dir / p.name) for p in scenario.peers}

    def child_env(self) -> dict[str, str]:
        env = one_thread_env({**os.environ, "PYTHONUNBUFFERED": "1"}, keep_set=True)
        env.pop(SECRET_VAR, None)  # the peers hold exactly the secret the runner signs with
        if self.secret:
            env[SECRET_VAR] = self.secret
        return env

    def running(self) -> list[ScenarioPeer]:
        return [p for p in self.peers.values() if p.state == "running"]

    async def start_initial(self) -> None:
        """The first initial peer founds the swarm; the other initial peers join it together."""
        initial = [p for p in self.peers.values() if not p.spec.late]
        first, rest = initial[0], initial[1:]
        await self.wait_ready([self.spawn(first, [])])
        seeds = [first.addr] if first.addr else []
        await self.wait_ready([self.spawn(p, seeds) for p in rest])

    def spawn(self, p: ScenarioPeer, seeds: list[str]) -> ScenarioPeer:
        n = self.scenario.shards
        summary = self.peers_dir / p.name / f"summary-{len(p.logs)}.json"
        args = [
            *flag_argv(self.scenario.flags_for(p.name)),
            *("--checkpoint-dir", str(p.checkpoint_dir)),
            *("--shard", f"{p.spec.index}/{n}"),
            *("--name", p.name),  # the id is the key's: the name is what others see of it
            *("--summary-json", str(summary)),
        ]
        if seeds:
            args += ["--join", ",".join(seeds)]
        if self.scenario.trust:
            args += ["--admission", "trust", "--trust", str(self._trust_file())]
        if self.operator_pem is not None:  # admin requests are signed with the runner's key
            pub = self.peers_dir / "operator.pub"
            if not pub.exists():
                self.peers_dir.mkdir(parents=True, exist_ok=True)
                pub.write_bytes(self.operator_pem)
            args += ["--enable-admin", "--admin-key", str(pub)]
        started = start_peer(
            args,
            self.peers_dir,
            p.name,
            self.child_env(),
            command=self.command,
            log_name=f"log-{len(p.logs)}.txt",  # one per start: a restart keeps the old one
            supervised=True,
        )
        p.current = started
        p.logs.append(str(started.log_path))
        p.summaries.append(str(summary))
        p.pids.append(started.pid)
        p.exit_codes.append(None)
        p.state = "starting"  # its address is unknown until the ready file appears
        p.expected_exit = False
        p.argv = started.argv
        return p

    def _trust_file(self) -> Path:
        """A closed swarm: every peer's key, made before its first start (a peer keeps the
        key it finds in its checkpoint dir), listed in one trust file."""
        path = self.peers_dir / "trust.keys"
        if not path.exists():
            lines = []
            for p in self.peers.values():
                key = PeerKey.generate()
                p.checkpoint_dir.mkdir(parents=True, exist_ok=True)
                fd = os.open(
                    p.checkpoint_dir / KEY_FILE, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600
                )
                with os.fdopen(fd, "wb") as fh:
                    fh.write(key.key_file_text())
                lines.append(f"{key.public_hex}  # {p.name}")
            path.write_text("\n".join(lines) + "\n")
        return path

    async def wait_ready(self, started: list[ScenarioPeer]) -> float:
        """Wait until each started peer has written its ready file; return the seconds taken."""
        t = time.monotonic()
        deadline = t + self.scenario.ready_timeout
        pending = list(started)
        while pending:
            for p in list(pending):
                if self._took_ready(p):
                    pending.remove(p)
                elif not p.alive():
                    self.mark_exited(p)
                    raise ChaosError(
                        f"peer {p.name} exited with code {p.exit_codes[-1]} before it was "
                        f"ready: {p.log_tail() or 'no output'}"
                    )
            if pending and time.monotonic() > deadline:
                for p in pending:
                    self.kill_now(p)
                names = ", ".join(p.name for p in pending)
                raise ChaosError(
                    f"peer {names} not ready after {self.scenario.ready_timeout:g} s: "
                    f"{pending[0].log_tail() or 'no output'}"
                )
            if pending:
                await asyncio.sleep(0.05)
        return time.monotonic() - t

    def _took_ready(self, p: ScenarioPeer) -> bool:
        assert p.current is not None
        if p.current.poll_ready() is None:
            return False
        p.addr, p.peer_id = p.current.addr, p.current.peer_id
        p.state = "running"
        p.addrs.append(p.addr)
        if p.peer_id not in p.peer_ids:
            p.peer_ids.append(p.peer_id)
        return True

    def mark_exited(self, p: ScenarioPeer) -> None:
        if p.proc is not None and p.proc.poll() is not None:
            p.exit_codes[-1] = p.proc.returncode
        p.state = "down"

    def kill_now(self, p: ScenarioPeer) -> None:
        p.expected_exit = True
        p.signal(signal.SIGCONT)
        p.signal(signal.SIGKILL)
        if p.proc is not None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                p.proc.wait(timeout=5)
        self.mark_exited(p)

    async def wait_exit(self, p: ScenarioPeer, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while p.alive() and time.monotonic() < deadline:  # noqa: ASYNC110 - a Popen has no awaitable exit
            await asyncio.sleep(0.02)
        return not p.alive()

    async def kill(self, p: ScenarioPeer) -> str:
        p.expected_exit = True
        p.signal(signal.SIGKILL)
        await self.wait_exit(p, 5.0)
        self.mark_exited(p)
        return f"pid {p.pids[-1]}"

    async def terminate(self, p: ScenarioPeer) -> str:
        p.expected_exit = True
        p.signal(signal.SIGTERM)
        if not await self.wait_exit(p, max(self.scenario.stop_grace, 1.0)):
            p.signal(signal.SIGKILL)
            await self.wait_exit(p, 5.0)
        self.mark_exited(p)
        return f"exit code {p.exit_codes[-1]}"

    async def restart(self, p: ScenarioPeer) -> float:
        """Start `p` again (or for the first time), joining up to 3 running peers; the seconds
        it took to be ready."""
        seeds = [q.addr for q in self.running() if q.addr]
        if not seeds:
            raise ChaosError("no running peer to join")
        self.spawn(p, seeds[:3])
        try:
            return await self.wait_ready([p])
        except ChaosError:
            self.kill_now(p)
            raise

    def newly_dead(self) -> list[ScenarioPeer]:
        """Peers that were up and have exited since the last look; marked down."""
        dead = []
        for p in self.peers.values():
            if p.state in ("running", "frozen") and not p.alive():
                self.mark_exited(p)
                dead.append(p)
        return dead

    async def shutdown(self) -> None:
        """SIGCONT + SIGTERM every live process, SIGKILL what is left after the grace period."""
        alive = [p for p in self.peers.values() if p.alive()]
        for p in alive:
            p.expected_exit = True
            p.signal(signal.SIGCONT)
            p.signal(signal.SIGTERM)
        deadline = time.monotonic() + self.scenario.stop_grace
        try:
            while any(p.alive() for p in alive) and time.monotonic() < deadline:  # noqa: ASYNC110
                await asyncio.sleep(0.05)
        finally:  # even if this wait is cancelled: nothing may outlive the runner
            self.kill_all_now()

    def kill_all_now(self) -> None:
        """Synchronous last resort: SIGKILL and reap every process this supervisor started."""
        for p in self.peers.values():
            if p.proc is None:
                continue
            if p.alive():
                self.kill_now(p)
            else:
                p.proc.wait()
                self.mark_exited(p)
