"""The chaos scenario runner: real peer processes on 127.0.0.1, a timeline of faults, sampling.

`ChaosRunner(scenario, report_dir).run()` starts every peer (port 0, its own checkpoint dir and
ready file under the report dir, shard i/N), waits until all have written their ready files
(t = 0), then follows the timeline while two owned tasks sample `/v1/status` (and, if asked,
every peer's parameters). At the end it stops every process it started -- on success, on an
error, on Ctrl-C -- evaluates the assertions and returns the report.

Processes run in their own session (so a Ctrl-C in the terminal reaches only the runner, which
then stops them in order) and, on Linux, with a parent-death signal, so even a SIGKILLed runner
leaves no orphans behind.

The swarm secret (see fault/chaos/scenario.py) is handed to every child through `SWARMNODE_SECRET` and
removed from their environment when there is none, so a secret in the runner's shell can never
make the peers refuse the runner's unsigned requests: whatever the peers hold, the runner signs
its admin and parameter requests with the same.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import dataclasses
import json
import math
import os
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import IO, Any

import aiohttp
from swarmnode.fault.chaos import probe
from swarmnode.fault.chaos.assertions import Result, RunRecord, evaluate, honest_peers
from swarmnode.fault.chaos.scenario import Event, PeerSpec, Scenario, flag_argv
from swarmnode.fault.inject.spec import FaultConfig, make_partition, parse_fault_spec
from swarmnode.gossip.auth import Signer
from swarmnode.kernels.errors import SwarmnodeError

DEFAULT_COMMAND = (sys.executable, "-m", "swarmnode", "start")
ADMIN_TIMEOUT = 3.0
PARAMS_TIMEOUT = 5.0
LOG_TAIL_LINES = 6
_ONE_THREAD = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")
SECRET_VAR = "SWARMNODE_SECRET"  # what `swarmnode start` reads when --secret is not given

try:  # prctl(PR_SET_PDEATHSIG) from the child; resolved here, not after fork
    _LIBC: Any = ctypes.CDLL(None, use_errno=True) if sys.platform.startswith("linux") else None
except OSError:  # pragma: no cover
    _LIBC = None


class ChaosError(SwarmnodeError):
    """The run itself failed: a peer did not start, an event could not be carried out."""


@dataclasses.dataclass
class PeerProcess:
    """One scenario peer across its (re)starts."""

    spec: PeerSpec
    workdir: Path
    proc: subprocess.Popen[bytes] | None = None
    state: str = "absent"  # absent | starting | running | frozen | down
    addr: str | None = None
    peer_id: str | None = None
    expected_exit: bool = False
    peer_ids: list[str] = dataclasses.field(default_factory=list)
    addrs: list[str] = dataclasses.field(default_factory=list)
    pids: list[int] = dataclasses.field(default_factory=list)
    exit_codes: list[int | None] = dataclasses.field(default_factory=list)
    logs: list[str] = dataclasses.field(default_factory=list)
    argv: list[str] = dataclasses.field(default_factory=list)  # of the latest start

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def ready_file(self) -> Path:
        return self.workdir / "ready.json"

    @property
    def checkpoint_dir(self) -> Path:
        return self.workdir / "ckpt"

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def signal(self, sig: int) -> None:
        if self.alive():
            assert self.proc is not None
            with contextlib.suppress(ProcessLookupError):
                self.proc.send_signal(sig)

    def log_tail(self) -> str:
        if not self.logs:
            return ""
        try:
            lines = Path(self.logs[-1]).read_text(errors="replace").splitlines()
        except OSError:
            return ""
        return " | ".join(line.strip() for line in lines[-LOG_TAIL_LINES:] if line.strip())


@dataclasses.dataclass
class RunOutcome:
    report: dict[str, Any]
    results: list[Result]
    exit_code: int  # 0 the run passed (see swarmnode.fault.chaos.report.verdict), 1 it did not


class ChaosRunner:
    """Drive one scenario. `command` is the argv prefix that starts a peer (default
    `python -m swarmnode start`); the runner appends the scenario's flags and its own."""

    def __init__(
        self,
        scenario: Scenario,
        report_dir: str | Path,
        *,
        command: Sequence[str] | None = None,
        out: IO[str] | None = None,
        quiet: bool = False,
    ) -> None:
        self.scenario = scenario
        self.report_dir = Path(report_dir)
        self.command = list(command or DEFAULT_COMMAND)
        self.out = out if out is not None else sys.stdout
        self.quiet = quiet
        self.peers = {
            p.name: PeerProcess(p, self.report_dir / "peers" / p.name) for p in scenario.peers
        }
        self.honest = set(honest_peers(scenario))
        self.samples: dict[str, list[dict[str, Any]]] = {p.name: [] for p in scenario.peers}
        self.last_status: dict[str, dict[str, Any]] = {}
        self.distances: list[dict[str, Any]] = []
        self.timeline: list[dict[str, Any]] = []
        self.notes: list[str] = []
        self.partition: tuple[tuple[str, ...], ...] = ()
        self.peer_faults: dict[str, FaultConfig] = {}
        self._faults_touched = False
        self._t0: float | None = None
        self._session: aiohttp.ClientSession | None = None
        self.error: str | None = None
        self.secret = scenario.secret or os.environ.get(SECRET_VAR) or None
        self.signer = Signer(self.secret) if self.secret else None

    # --- the run -------------------------------------------------------------------------------

    async def run(self) -> RunOutcome:
        from swarmnode.fault.chaos.report import build_report, write_report

        self.report_dir.mkdir(parents=True, exist_ok=True)
        started_at = time.time()
        t_start = time.monotonic()
        result = "error"
        durations: dict[str, float] = {}
        end_state: dict[str, str] = {}
        try:
            async with aiohttp.ClientSession() as session:
                self._session = session
                self._say(f"chaos: {self.scenario.name}: starting {self._initial_count()} peers")
                await self._start_initial()
                self._t0 = time.monotonic()
                durations["startup_s"] = self._t0 - t_start
                await self._follow_timeline()
                result = "completed"
        except asyncio.CancelledError:
            result = "interrupted"
            raise
        except ChaosError as exc:
            self.error = str(exc)
            self._say(f"chaos: error: {exc}")
        finally:
            end_t = self.now()
            end_state = {name: p.state for name, p in self.peers.items()}
            t_stop = time.monotonic()
            await self._shutdown()
            durations["timeline_s"] = end_t
            durations["shutdown_s"] = time.monotonic() - t_stop
            durations["total_s"] = time.monotonic() - t_start
            record = self.record(end_t, end_state)
            results = evaluate(self.scenario, record) if result != "error" else []
            report = build_report(self, record, results, result, started_at, durations)
            write_report(self.report_dir, report)
        code = 0 if report["passed"] else 1
        return RunOutcome(report, results, code)

    def now(self) -> float:
        return 0.0 if self._t0 is None else time.monotonic() - self._t0

    def record(self, end_t: float, final_state: dict[str, str]) -> RunRecord:
        return RunRecord(
            samples=self.samples,
            distances=self.distances,
            timeline=self.timeline,
            peer_ids={n: p.peer_ids for n, p in self.peers.items()},
            final_state=final_state,
            end_t=end_t,
        )

    def _initial_count(self) -> int:
        return sum(not p.late for p in self.scenario.peers)

    async def _sleep_until(self, t: float) -> None:
        delay = t - self.now()
        if delay > 0:
            await asyncio.sleep(delay)

    async def _follow_timeline(self) -> None:
        tasks = [asyncio.create_task(self._sample_loop(), name="chaos-sample")]
        if self.scenario.params_every > 0:
            tasks.append(asyncio.create_task(self._params_loop(), name="chaos-params"))
        try:
            for index, event in enumerate(self.scenario.events):
                await self._sleep_until(event.at)
                await self._do_event(index, event)
            await self._sleep_until(self.scenario.duration)
        finally:
            for task in tasks:
                task.cancel()
            outcomes = await asyncio.gather(*tasks, return_exceptions=True)
        for outcome in outcomes:  # a sampler bug must not pass silently
            if isinstance(outcome, Exception):
                raise outcome
        await self._sample_once()  # the final sample, at t = duration

    # --- processes -----------------------------------------------------------------------------

    async def _start_initial(self) -> None:
        initial = [p for p in self.peers.values() if not p.spec.late]
        first, rest = initial[0], initial[1:]
        await self._wait_ready([self._spawn(first, [])])
        seeds = [first.addr] if first.addr else []
        await self._wait_ready([self._spawn(p, seeds) for p in rest])

    def _spawn(self, p: PeerProcess, seeds: list[str]) -> PeerProcess:
        p.workdir.mkdir(parents=True, exist_ok=True)
        with contextlib.suppress(FileNotFoundError):
            p.ready_file.unlink()
        n = len(self.scenario.peers)
        argv = [
            *self.command,
            *flag_argv(self.scenario.flags_for(p.name)),
            *("--listen", "127.0.0.1:0"),
            *("--ready-file", str(p.ready_file)),
            *("--checkpoint-dir", str(p.checkpoint_dir)),
            *("--shard", f"{p.spec.index}/{n}"),
        ]
        if seeds:
            argv += ["--join", ",".join(seeds)]
        log_path = p.workdir / f"log-{len(p.logs)}.txt"
        env = self._child_env()
        with open(log_path, "wb") as log:  # the child keeps its own copy of the descriptor
            p.proc = subprocess.Popen(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=env,
                start_new_session=True,
                preexec_fn=_die_with_parent,  # does one prctl call: safe between fork and exec
            )
        p.logs.append(str(log_path))
        p.pids.append(p.proc.pid)
        p.exit_codes.append(None)
        p.state = "starting"  # its address is unknown until the ready file appears
        p.expected_exit = False
        p.argv = argv
        return p

    def _child_env(self) -> dict[str, str]:
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        for var in _ONE_THREAD:  # N peers share few cores: threaded BLAS would thrash them
            env.setdefault(var, "1")
        env.pop(SECRET_VAR, None)  # the peers hold exactly the secret the runner signs with
        if self.secret:
            env[SECRET_VAR] = self.secret
        return env

    async def _wait_ready(self, started: list[PeerProcess]) -> float:
        """Wait until each started peer has written its ready file; return the seconds taken."""
        t = time.monotonic()
        deadline = t + self.scenario.ready_timeout
        pending = list(started)
        while pending:
            for p in list(pending):
                info = _read_ready(p.ready_file)
                if info is not None:
                    p.addr, p.peer_id = str(info["addr"]), str(info.get("peer_id"))
                    p.state = "running"
                    p.addrs.append(p.addr)
                    if p.peer_id not in p.peer_ids:
                        p.peer_ids.append(p.peer_id)
                    pending.remove(p)
                elif not p.alive():
                    self._mark_exited(p)
                    raise ChaosError(
                        f"peer {p.name} exited with code {p.exit_codes[-1]} before it was "
                        f"ready: {p.log_tail() or 'no output'}"
                    )
            if pending and time.monotonic() > deadline:
                for p in pending:
                    self._kill_now(p)
                names = ", ".join(p.name for p in pending)
                raise ChaosError(
                    f"peer {names} not ready after {self.scenario.ready_timeout:g} s: "
                    f"{pending[0].log_tail() or 'no output'}"
                )
            if pending:
                await asyncio.sleep(0.05)
        return time.monotonic() - t

    def _mark_exited(self, p: PeerProcess) -> None:
        if p.proc is not None and p.proc.poll() is not None:
            p.exit_codes[-1] = p.proc.returncode
        p.state = "down"

    def _kill_now(self, p: PeerProcess) -> None:
        p.expected_exit = True
        p.signal(signal.SIGCONT)
        p.signal(signal.SIGKILL)
        if p.proc is not None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                p.proc.wait(timeout=5)
        self._mark_exited(p)

    async def _wait_exit(self, p: PeerProcess, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while p.alive() and time.monotonic() < deadline:  # noqa: ASYNC110 - a Popen has no awaitable exit
            await asyncio.sleep(0.02)
        return not p.alive()

    async def _shutdown(self) -> None:
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
        """Synchronous last resort: SIGKILL and reap every process this runner started."""
        for p in self.peers.values():
            if p.proc is None:
                continue
            if p.alive():
                self._kill_now(p)
            else:
                p.proc.wait()
                self._mark_exited(p)

    def _check_children(self) -> None:
        """Record a child that died without being told to."""
        for p in self.peers.values():
            if p.state in ("running", "frozen") and not p.alive():
                self._mark_exited(p)
                if not p.expected_exit:
                    entry = {
                        "t": round(self.now(), 3),
                        "index": None,
                        "action": "died",
                        "peer": p.name,
                        "label": f"{p.name} died",
                        "ok": False,
                        "exit_code": p.exit_codes[-1],
                        "log_tail": p.log_tail(),
                    }
                    self.timeline.append(entry)
                    self._say(
                        f"chaos: t={entry['t']:.1f}s peer {p.name} died unexpectedly "
                        f"(exit code {entry['exit_code']}): {entry['log_tail'] or 'no output'}"
                    )

    # --- events --------------------------------------------------------------------------------

    async def _do_event(self, index: int, e: Event) -> None:
        self._check_children()
        entry: dict[str, Any] = {
            "t": round(self.now(), 3),
            "index": index,
            "scheduled": e.at,
            "action": e.action,
            "peer": e.peer,
            "id": e.id,
            "label": e.label,
        }
        try:
            detail = await getattr(self, f"_ev_{e.action}")(e)
            entry["ok"] = True
            if detail:
                entry["detail"] = detail
        except ChaosError as exc:
            entry["ok"] = False
            entry["error"] = str(exc)
        self.timeline.append(entry)
        outcome = entry.get("detail", "") if entry["ok"] else f"FAILED: {entry['error']}"
        self._say(f"chaos: t={entry['t']:.1f}s {e.label} {outcome}".rstrip())

    def _peer(self, e: Event) -> PeerProcess:
        assert e.peer is not None  # the scenario parser guarantees it for peer actions
        return self.peers[e.peer]

    def _need_state(self, p: PeerProcess, *states: str) -> None:
        if p.state not in states:
            raise ChaosError(f"peer {p.name} is {p.state}, not {' or '.join(states)}")

    async def _ev_kill(self, e: Event) -> str:
        p = self._peer(e)
        self._need_state(p, "running", "frozen")
        p.expected_exit = True
        p.signal(signal.SIGKILL)
        await self._wait_exit(p, 5.0)
        self._mark_exited(p)
        return f"pid {p.pids[-1]}"

    async def _ev_terminate(self, e: Event) -> str:
        p = self._peer(e)
        self._need_state(p, "running")
        p.expected_exit = True
        p.signal(signal.SIGTERM)
        if not await self._wait_exit(p, max(self.scenario.stop_grace, 1.0)):
            p.signal(signal.SIGKILL)
            await self._wait_exit(p, 5.0)
        self._mark_exited(p)
        return f"exit code {p.exit_codes[-1]}"

    async def _ev_freeze(self, e: Event) -> str:
        p = self._peer(e)
        self._need_state(p, "running")
        p.signal(signal.SIGSTOP)
        p.state = "frozen"
        return ""

    async def _ev_thaw(self, e: Event) -> str:
        p = self._peer(e)
        self._need_state(p, "frozen")
        p.signal(signal.SIGCONT)
        p.state = "running"
        if self._faults_touched:  # it missed the fault changes made while it was frozen
            await self._push_faults([p])
        return ""

    async def _ev_restart(self, e: Event) -> str:
        p = self._peer(e)
        self._need_state(p, "down", "absent")
        seeds = [q.addr for q in self.peers.values() if q.state == "running" and q.addr]
        if not seeds:
            raise ChaosError("no running peer to join")
        self._spawn(p, seeds[:3])
        try:
            took = await self._wait_ready([p])
        except ChaosError:
            self._kill_now(p)
            raise
        if self._faults_touched:  # its address is new: every partition spec must learn it
            await self._push_faults([q for q in self.peers.values() if q.state == "running"])
        return f"ready in {took:.1f}s as {p.peer_id} at {p.addr}"

    _ev_join = _ev_restart

    async def _ev_partition(self, e: Event) -> str:
        self.partition = e.groups
        self._faults_touched = True
        return await self._push_faults([q for q in self.peers.values() if q.state == "running"])

    async def _ev_heal(self, e: Event) -> str:
        self.partition = ()
        return await self._push_faults([q for q in self.peers.values() if q.state == "running"])

    async def _ev_fault(self, e: Event) -> str:
        p = self._peer(e)
        self._need_state(p, "running")
        self.peer_faults[p.name] = parse_fault_spec(e.spec or "none")
        self._faults_touched = True
        return await self._push_faults([p])

    async def _ev_byzantine(self, e: Event) -> str:
        p = self._peer(e)
        self._need_state(p, "running")
        kind = None if (e.kind or "none").lower() == "none" else e.kind
        return await self._admin(p, "byzantine", probe.byzantine_body(kind))

    async def _ev_slowdown(self, e: Event) -> str:
        p = self._peer(e)
        self._need_state(p, "running")
        return await self._admin(p, "slowdown", probe.slowdown_body(e.factor or 1.0))

    def fault_for(self, name: str) -> FaultConfig:
        """The peer's own fault spec with the current partition (by current addresses)."""
        base = self.peer_faults.get(name, FaultConfig())
        groups = [
            [self.peers[m].addr for m in group if self.peers[m].addr] for group in self.partition
        ]
        return dataclasses.replace(base, partition=make_partition([g for g in groups if g]))

    async def _push_faults(self, targets: list[PeerProcess]) -> str:
        errors = []
        for p in targets:
            try:
                await self._admin(p, "fault", probe.fault_body(self.fault_for(p.name)))
            except ChaosError as exc:
                errors.append(str(exc))
        if errors:
            raise ChaosError("; ".join(errors))
        return f"sent to {', '.join(p.name for p in targets)}"

    async def _admin(self, p: PeerProcess, route: str, body: bytes) -> str:
        assert self._session is not None and p.addr is not None
        why = await probe.post_admin(
            self._session, p.addr, route, body, ADMIN_TIMEOUT, signer=self.signer
        )
        if why:
            raise ChaosError(f"admin/{route} on {p.name}: {why}")
        return ""

    # --- sampling ------------------------------------------------------------------------------

    async def _sample_loop(self) -> None:
        every = self.scenario.sample_every
        k = 0
        while True:
            await self._sleep_until(k * every)
            await self._sample_once()
            k = max(k + 1, math.ceil(self.now() / every))  # fell behind: skip, never burst

    async def _sample_once(self) -> None:
        self._check_children()
        t = round(self.now(), 3)
        started = [p for p in self.peers.values() if p.state != "absent"]
        samples = await asyncio.gather(*(self._sample_peer(p, t) for p in started))
        for p, sample in zip(started, samples, strict=True):
            self.samples[p.name].append(sample)
        if not self.quiet:
            self._say(progress_line(t, {p.name: s for p, s in zip(started, samples, strict=True)}))

    async def _sample_peer(self, p: PeerProcess, t: float) -> dict[str, Any]:
        if p.state in ("down", "frozen", "starting"):
            return {"t": t, "ok": False, "why": p.state}
        assert self._session is not None and p.addr is not None
        status, why = await probe.fetch_status(self._session, p.addr, self.scenario.sample_timeout)
        if status is None:
            return {"t": t, "ok": False, "why": why}
        self.last_status[p.name] = status
        return {"t": t, "ok": True, **probe.condense(status)}

    async def _params_loop(self) -> None:
        every = self.scenario.params_every
        k = 0
        while True:
            await self._sleep_until(k * every)
            if not await self._params_once():
                return
            k = max(k + 1, math.ceil(self.now() / every))

    async def _params_once(self) -> bool:
        """One distance sample over the honest running peers; False when it cannot work at all.

        Byzantine peers that are running are pulled too: how far what they serve lies from the
        nearest honest model shows whether an attack is really being served."""
        assert self._session is not None
        t = round(self.now(), 3)
        peers = [p for p in self.peers.values() if p.state == "running"]
        timeout = max(PARAMS_TIMEOUT, self.scenario.sample_timeout)
        pulled = await asyncio.gather(
            *(
                probe.fetch_params(self._session, p.addr or "", timeout, signer=self.signer)
                for p in peers
            )
        )
        missing = {p.name: why for p, (vec, why) in zip(peers, pulled, strict=True) if vec is None}
        if "swarmnode.gossip.wire is not available" in missing.values():
            self.notes.append("model distances not sampled: swarmnode.gossip.wire is not available")
            return False
        got = [(p.name, vec) for p, (vec, _) in zip(peers, pulled, strict=True) if vec is not None]
        honest = [vec for name, vec in got if name in self.honest]
        served = {name: vec for name, vec in got if name not in self.honest}
        entry: dict[str, Any] = await asyncio.to_thread(_distance_entry, honest, served)
        entry.update(t=t, missing=missing)
        self.distances.append(entry)
        return True

    def _say(self, line: str) -> None:
        print(line, file=self.out, flush=True)


def progress_line(t: float, samples: dict[str, dict[str, Any]]) -> str:
    """`t=  12.0s  a 340 91.2%  b frozen  c timeout` -- one line per sample interval."""
    parts = [f"t={t:6.1f}s"]
    for name, s in samples.items():
        if s.get("ok"):
            acc = s.get("acc")
            acc_text = "-" if acc is None else f"{100 * acc:.1f}%"
            parts.append(f"{name} {s.get('step')} {acc_text}")
        else:
            parts.append(f"{name} {s.get('why', '?').split(':')[0]}")
    return "  ".join(parts)


def _distance_entry(honest: list[Any], served: dict[str, Any]) -> dict[str, Any]:
    """`{"max": honest spread, "n": honest count[, "byzantine": {name: its position}]}` (see
    `probe.relative_position`); numpy work over whole models: run it in a worker thread."""
    entry: dict[str, Any] = {"max": probe.max_pairwise_distance(honest), "n": len(honest)}
    if served:
        entry["byzantine"] = {
            name: probe.relative_position(vec, honest) for name, vec in served.items()
        }
    return entry


def _read_ready(path: Path) -> dict[str, Any] | None:
    try:
        info = json.loads(path.read_text())
    except (OSError, ValueError):  # absent, or caught between write and rename
        return None
    return info if isinstance(info, dict) and info.get("addr") else None


def _die_with_parent() -> None:  # runs in the child between fork and exec
    if _LIBC is not None:
        _LIBC.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG = 1
