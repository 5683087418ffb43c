"""`swarmnode chaos SCENARIO.toml`: run a fault scenario against real local peer processes.

Exit codes: 0 the run passed: every event was carried out, no peer died unexpectedly, and every
assertion held (or failed where `must_fail` expects it); 1 it did not (an assertion failed, a
peer died on its own, an event could not be carried out, a peer did not start; report.json's
`result` is "fail" or "error" and `reasons` says why); 2 a bad scenario file or command line
(one line on stderr naming the problem); 130 interrupted by Ctrl-C, 143 by SIGTERM. Every peer
process started is stopped on any of these paths.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import datetime
import os
import shlex
import signal
import sys
from pathlib import Path
from typing import Any, TextIO

from swarmnode.fault.chaos import (
    PLOT_NAME,
    ChaosError,
    ChaosRunner,
    PlotUnavailable,
    final_table,
    write_plot,
    write_report,
)
from swarmnode.fault.chaos.scenario import Scenario, load_scenario
from swarmnode.node.cli.command import DefaultsFormatter
from swarmnode.node.settings import check_node_table

HELP = "run a fault scenario (kill, freeze, partition, byzantine...) against local peer processes"

DESCRIPTION = """\
Start the scenario's peers as real processes on 127.0.0.1, follow its timeline of faults, sample
every peer's /v1/status, check the scenario's assertions, and write report.json and plot.png to
the report directory. docs/chaos.md documents every key of the file and every assertion kind;
examples are in scripts/scenarios/.
"""

SECRET_VAR = "SWARMNODE_SECRET"  # the runner's default secret for every peer
EXIT_FAILED = 1  # report.json's "result" is "fail" or "error"
EXIT_INTERRUPTED = 130
EXIT_TERMINATED = 143


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "chaos",
        help=HELP,
        description=DESCRIPTION,
        formatter_class=DefaultsFormatter,
    )
    p.add_argument("scenario", metavar="SCENARIO.toml", help="the scenario file")
    add_run_options(p)
    p.set_defaults(func=run)


def add_run_options(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--report",
        metavar="DIR",
        default=None,
        help="report directory (default: ./runs/<scenario>-<timestamp>/)",
    )
    p.add_argument(
        "--peer-command",
        default=None,
        metavar="CMD",
        help="command that starts one peer, shell-quoted (default: python -m swarmnode start)",
    )
    p.add_argument("--no-plot", action="store_true", help="do not draw plot.png")
    p.add_argument("--quiet", action="store_true", help="no progress line per sample")


def run(args: argparse.Namespace) -> int:
    # a ScenarioError becomes exit code 2 in swarmnode.node.cli.command; [node] and [[peer]]
    # are checked by `swarmnode start --config`'s loader
    scenario = load_scenario(args.scenario, node_check=check_node_table)
    code, _ = run_scenario(
        scenario,
        args.report or default_report_dir(scenario.name),
        command=shlex.split(args.peer_command) if args.peer_command else None,
        plot=not args.no_plot,
        quiet=args.quiet,
    )
    return code


def default_report_dir(name: str, root: str | Path = "runs") -> Path:
    stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
    return Path(root) / f"{name}-{stamp}"


def run_scenario(
    scenario: Scenario,
    report_dir: str | Path,
    *,
    command: list[str] | None = None,
    plot: bool = True,
    quiet: bool = False,
    out: TextIO | None = None,
    runner_class: type[ChaosRunner] = ChaosRunner,
) -> tuple[int, ChaosRunner]:
    """Run `scenario` to the end; print the final table; return (exit code, the runner).
    `runner_class`: a ChaosRunner that does more at the end of its timeline (`demo --keep`)."""
    out = out or sys.stdout
    if scenario.secret is None and SECRET_VAR in os.environ and not os.environ[SECRET_VAR].strip():
        # the runner would take it for no secret and start an open swarm, as `start` refuses to
        raise ChaosError(f"${SECRET_VAR} is empty: set the swarm's secret, or unset it")
    if (Path(report_dir) / "peers").exists():  # its checkpoints would be resumed: a mixed run
        raise ChaosError(f"{report_dir} already holds a chaos run; give another --report DIR")
    runner = runner_class(scenario, report_dir, command=command, out=out, quiet=quiet)
    if scenario.description:
        print(f"chaos: {scenario.name}: {scenario.description}", file=out, flush=True)
    try:
        outcome = asyncio.run(_main(runner))
    except KeyboardInterrupt:
        print("chaos: interrupted; every peer stopped", file=out, flush=True)
        return EXIT_INTERRUPTED, runner
    except asyncio.CancelledError:  # SIGTERM
        print("chaos: terminated; every peer stopped", file=out, flush=True)
        return EXIT_TERMINATED, runner
    finally:
        runner.kill_all_now()  # a no-op after a normal run; the last line of defence otherwise
    report = outcome.report
    if plot:
        try:
            path = write_plot(report, runner.report_dir / PLOT_NAME)
            report["plot"] = path.name
            write_report(runner.report_dir, report)
        except PlotUnavailable as exc:
            print(f"chaos: {exc}", file=out, flush=True)
    print(final_table(report), file=out, flush=True)
    print(f"chaos: report in {runner.report_dir}/", file=out, flush=True)
    return (0 if report["passed"] else EXIT_FAILED), runner


async def _main(runner: ChaosRunner) -> Any:
    """Run with SIGTERM mapped to cancellation, so the runner's clean-up path runs."""
    loop = asyncio.get_running_loop()
    task = asyncio.current_task()
    installed = False
    if task is not None:
        with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
            loop.add_signal_handler(signal.SIGTERM, task.cancel)
            installed = True
    try:
        return await runner.run()
    finally:
        if installed:
            loop.remove_signal_handler(signal.SIGTERM)
