"""The chaos scenario runner: real peer processes on 127.0.0.1, a timeline of faults, sampling.

`ChaosRunner(scenario, report_dir).run()` starts every peer (port 0, its own checkpoint dir and
ready file under the report dir, shard i/N), waits until all have written their ready files
(t = 0), then follows the timeline while two owned tasks sample `/v1/status` (and, if asked,
every peer's parameters). At the end it stops every process it started -- on success, on an
error, on Ctrl-C -- evaluates the assertions and returns the report.

The runner composes three parts: the supervisor (swarmnode.fault.chaos.supervisor: the
processes), the timeline (swarmnode.fault.chaos.timeline: the events) and the sampler
(swarmnode.fault.chaos.sampler: what the peers report). Whatever secret the peers hold (the
scenario's, else `SWARMNODE_SECRET` from the runner's shell), the runner signs its admin and
parameter requests with the same.
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import IO, Any

import aiohttp
from swarmnode.fault.chaos.assertions import Result, RunRecord, evaluate, honest_peers
from swarmnode.fault.chaos.control import control_scenario
from swarmnode.fault.chaos.errors import ChaosError
from swarmnode.fault.chaos.processes import START_COMMAND
from swarmnode.fault.chaos.report import RunContext, build_report, write_report
from swarmnode.fault.chaos.sampler import Clock, Sampler
from swarmnode.fault.chaos.scenario import Scenario
from swarmnode.fault.chaos.supervisor import SECRET_VAR, ScenarioPeer, Supervisor
from swarmnode.fault.chaos.timeline import Timeline
from swarmnode.gossip.auth import OperatorKey, Signer

__all__ = ["ChaosError", "ChaosRunner", "RunOutcome"]

DEFAULT_COMMAND = START_COMMAND


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
        self.honest = set(honest_peers(scenario))
        self.error: str | None = None
        self.secret = scenario.secret or os.environ.get(SECRET_VAR) or None
        self.signer = Signer(self.secret) if self.secret else None
        self.clock = Clock()
        self.operator = OperatorKey.generate()  # one per run; peers get its public half
        self.supervisor = Supervisor(
            scenario, self.report_dir, self.command, self.secret, self.operator.public_pem()
        )
        self.events = Timeline(
            self.supervisor,
            self.clock,
            operator=self.operator,
            say=self._say,
            honest=self.honest,
            signer=self.signer,
        )
        self.last_record: RunRecord | None = None
        # the control swarm, run alongside (swarmnode.fault.chaos.control)
        self.control = (
            ChaosRunner(
                control_scenario(scenario),
                self.report_dir / "control",
                command=self.command,
                out=_Prefixed(self.out, "control: "),
                quiet=True,
            )
            if scenario.control is not None
            else None
        )
        self.sampler = Sampler(
            scenario,
            self.supervisor.peers,
            self.honest,
            self.clock,
            signer=self.signer,
            operator=self.operator,
            before_sample=self.events.record_deaths,
            say=self._say,
            quiet=quiet,
        )

    # What callers read during and after a run (the CLI, the demo, the tests).
    @property
    def peers(self) -> dict[str, ScenarioPeer]:
        return self.supervisor.peers

    @property
    def timeline(self) -> list[dict[str, Any]]:
        return self.events.entries

    @property
    def samples(self) -> dict[str, list[dict[str, Any]]]:
        return self.sampler.samples

    @property
    def last_status(self) -> dict[str, dict[str, Any]]:
        return self.sampler.last_status

    def now(self) -> float:
        return self.clock.now()

    def kill_all_now(self) -> None:
        """Synchronous last resort: SIGKILL and reap every process this runner started."""
        self.supervisor.kill_all_now()
        if self.control is not None:
            self.control.kill_all_now()

    async def run(self) -> RunOutcome:
        self.report_dir.mkdir(parents=True, exist_ok=True)
        started_at = time.time()
        t_start = time.monotonic()
        result = "error"
        durations: dict[str, float] = {}
        control = (
            asyncio.create_task(self.control.run(), name="chaos-control") if self.control else None
        )
        try:
            async with aiohttp.ClientSession() as session:
                self.events.session = self.sampler.session = session
                initial = sum(not p.late for p in self.scenario.peers)
                self._say(f"chaos: {self.scenario.name}: starting {initial} peers")
                await self.supervisor.start_initial()
                first = next((p.addr for p in self.peers.values() if p.addr), None)
                if first is not None:  # every peer serves its page; the founder's is one
                    self._say(f"chaos: watch the swarm live at http://{first}/")
                self.clock.start()
                assert self.clock.t0 is not None
                durations["startup_s"] = self.clock.t0 - t_start
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
            await self.supervisor.shutdown()
            durations["timeline_s"] = end_t
            durations["shutdown_s"] = time.monotonic() - t_stop
            record = self.record(end_t, end_state)
            if control is not None:
                record.control, record.control_result = await self._control_done(control, result)
            durations["total_s"] = time.monotonic() - t_start
            self.last_record = record
            results = evaluate(self.scenario, record) if result != "error" else []
            report = build_report(self.context(), record, results, result, started_at, durations)
            write_report(self.report_dir, report)
        code = 0 if report["passed"] else 1
        return RunOutcome(report, results, code)

    async def _control_done(
        self, task: asyncio.Task[RunOutcome], result: str
    ) -> tuple[RunRecord | None, str]:
        """The control run's record once it has ended (cancelled when this run did not
        complete: its comparison would mean nothing)."""
        assert self.control is not None
        if result != "completed":
            task.cancel()
        try:
            outcome = await asyncio.shield(task)
        except asyncio.CancelledError:
            if not task.done():  # we are cancelled ourselves: the control must still end
                task.cancel()
                await asyncio.gather(task, return_exceptions=True)
                raise
            return None, "interrupted"
        return self.control.last_record, outcome.report["result"]

    def record(self, end_t: float, final_state: dict[str, str]) -> RunRecord:
        return RunRecord(
            samples=self.samples,
            distances=self.sampler.distances,
            timeline=self.timeline,
            peer_ids={n: p.peer_ids for n, p in self.peers.items()},
            final_state=final_state,
            end_t=end_t,
            hostile=self.events.hostile.reports,
        )

    def context(self) -> RunContext:
        return RunContext(
            scenario=self.scenario,
            command=self.command,
            report_dir=self.report_dir,
            peers=self.peers,
            honest=self.honest,
            notes=self.sampler.notes,
            error=self.error,
            authenticated=self.signer is not None,
        )

    async def _follow_timeline(self) -> None:
        tasks = [asyncio.create_task(self.sampler.status_loop(), name="chaos-sample")]
        if self.scenario.params_every > 0:
            tasks.append(asyncio.create_task(self.sampler.params_loop(), name="chaos-params"))
        try:
            for index, event in enumerate(self.scenario.events):
                await self.clock.sleep_until(event.at)
                await self.events.do_event(index, event)
            await self.clock.sleep_until(self.scenario.duration)
        finally:
            try:
                await self.events.hostile.stop()  # attackers first: the last sample is after
            finally:
                for task in tasks:
                    task.cancel()
                outcomes = await asyncio.gather(*tasks, return_exceptions=True)
        for outcome in outcomes:  # a sampler bug must not pass silently
            if isinstance(outcome, Exception):
                raise outcome
        await self.sampler.sample_once()  # the final sample, at t = duration

    def _say(self, line: str) -> None:
        print(line, file=self.out, flush=True)


class _Prefixed:
    """An output stream that puts `prefix` before each line (the control run's lines)."""

    def __init__(self, out: IO[str], prefix: str) -> None:
        self.out, self.prefix = out, prefix

    def write(self, text: str) -> int:
        lines = text.splitlines(keepends=True)
        return self.out.write("".join(self.prefix + ln if ln.strip() else ln for ln in lines))

    def flush(self) -> None:
        self.out.flush()
