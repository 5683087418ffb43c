"""`swarmnode demo`: a friendly 4-peer swarm learning a signal task, one peer joining late.

The scenario is built in (scripts/ is not installed with the package); scripts/scenarios/demo.toml
holds the same text, and a test keeps the two equal. It runs through the chaos runner, so it
prints one progress line per second, the chaos runner's table and verdicts, then each peer's own
final figures (the summary it wrote as it stopped, not another peer's gossiped view of it), and
leaves report.json and plot.png in ./runs/demo-<timestamp>/ (or --report DIR). Every peer serves
its live page at http://ADDRESS/ meanwhile (the addresses are in the report's peers) and stops
with it, as the line that gives the address says; `--keep` keeps the swarm training and its
pages up after the timeline, until Ctrl-C. `--quick` runs the same swarm for 15 s with d joining
at t=5 s: a smoke test of the whole stack in about half a minute. The demo's own lines say
`demo:` (the chaos runner drives it, but a new user is not running a fault scenario), and the
last one names the next step: a real swarm of two machines.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import math
import shlex
import signal
import sys
from pathlib import Path
from typing import Any, TextIO

from swarmnode.fault.chaos import ChaosRunner
from swarmnode.fault.chaos.scenario import Scenario, parse_scenario_text
from swarmnode.node.cli.cmd_chaos import default_report_dir, run_scenario
from swarmnode.node.cli.command import DefaultsFormatter
from swarmnode.node.settings import check_node_table

HELP = "run a small local swarm on a signal task with live progress and a final table"

DEMO_TOML = """\
# The `swarmnode demo` swarm (node/cli/cmd_demo.py ships the same text). No faults: four peers on
# 127.0.0.1 gossip-average an MLP on the generated signal task; d joins late and must catch up.
# A task the swarm cannot solve at once: 24 classes of shifted, noisy 1-D signals with 10% of the
# train labels flipped (chance 4%). Paced at 0.03 s a step (a compute-bound peer; four of them
# share a laptop's cores) and lr 0.02, the swarm climbs from ~10% to ~58% over about 20 s.
# Every key is documented in docs/chaos.md.

[scenario]
name = "demo"
description = "4 peers learn a signal task together; d joins at t=10 s and catches up"
duration = 40

[node]
model = "mlp:64"
data = "signal:4000,96,24"
lr = 0.02
weight_decay = 5e-4
step_time = 0.03
steps = 0
eval_every = 30
checkpoint_every = 300
gossip_interval = 0.5
exchange = "average"
sync_every = 10
exchange_timeout = 2.0

[[peer]]
name = "a"
[[peer]]
name = "b"
[[peer]]
name = "c"
[[peer]]
name = "d"

[[event]]
at = 10
action = "join"
peer = "d"
label = "d joins"

[[assert]]
kind = "final_accuracy"
min = 0.40
[[assert]]
kind = "catch_up"
within = 0.05
"""


# --quick: the swarm is past 40% about 10 s after the start (chance: 4%), and a joiner syncs its
# state from the swarm when it joins, so 10 s after the join are enough for both bars.
QUICK_DURATION = 15.0
QUICK_JOIN_AT = 5.0


def demo_scenario(quick: bool = False) -> Scenario:
    """The demo swarm; `quick` shortens the timeline (same peers, flags and bars)."""
    sc = parse_scenario_text(
        DEMO_TOML, source="swarmnode demo", default_name="demo", node_check=check_node_table
    )
    if not quick:
        return sc
    events = tuple(dataclasses.replace(e, at=QUICK_JOIN_AT) for e in sc.events)
    return dataclasses.replace(
        sc,
        duration=QUICK_DURATION,
        events=events,
        description=f"{sc.description.split(';')[0]}; d joins at t={QUICK_JOIN_AT:g} s (quick)",
    )


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "demo",
        help=HELP,
        description=__doc__.split("\n\n")[0],
        formatter_class=DefaultsFormatter,
    )
    p.add_argument(
        "--report", metavar="DIR", default=None, help="default: ./runs/demo-<timestamp>/"
    )
    p.add_argument(
        "--quick",
        action="store_true",
        help=f"a {QUICK_DURATION:g} s run, d joining at t={QUICK_JOIN_AT:g} s (a smoke test)",
    )
    p.add_argument(
        "--keep",
        action="store_true",
        help="after the timeline, keep the swarm training and its pages up until Ctrl-C "
        "(the table and the report still describe the timeline)",
    )
    p.add_argument("--peer-command", default=None, help=argparse.SUPPRESS)  # tests only
    p.set_defaults(func=run)


NEXT_STEP = (
    "next: a swarm of your own machines: `swarmnode start --listen 0.0.0.0:7070` on one, "
    "`swarmnode start --listen 0.0.0.0:7070 --join HOST:7070` on each other one "
    "(docs/deploy.md)"
)
PAGE_LINE = "chaos: watch the swarm live at "  # the runner's line that gives the page


def run(args: argparse.Namespace) -> int:
    scenario = demo_scenario(quick=args.quick)
    voice = DemoVoice(sys.stdout, scenario.duration, args.keep)
    code, runner = run_scenario(
        scenario,
        args.report or default_report_dir(scenario.name),
        command=shlex.split(args.peer_command) if args.peer_command else None,
        out=voice,
        runner_class=KeepRunner if args.keep else ChaosRunner,
    )
    print("\neach peer's own final figures (the summary it wrote as it stopped):")
    print(summary_table({name: p.summaries for name, p in runner.peers.items()}))
    print(f"\n{NEXT_STEP}", flush=True)
    return code


class DemoVoice:
    """The chaos runner's lines as the demo's: `demo:` for `chaos:`, and the page's line says
    how long the page lives."""

    def __init__(self, out: TextIO, duration: float, keep: bool) -> None:
        self.out = out
        self.until = (
            "kept up until Ctrl-C"
            if keep
            else f"until the demo ends at t={duration:g} s; --keep keeps it up until Ctrl-C"
        )

    def write(self, text: str) -> int:
        return self.out.write("".join(map(self._line, text.splitlines(keepends=True))))

    def flush(self) -> None:
        self.out.flush()

    def _line(self, line: str) -> str:
        if line.startswith(PAGE_LINE):
            body = line.rstrip("\n")
            line = f"{body} ({self.until}){line[len(body) :]}"
        if line.startswith("chaos: demo: "):  # the scenario's name: the demo's own
            return "demo: " + line.removeprefix("chaos: demo: ")
        return "demo: " + line.removeprefix("chaos: ") if line.startswith("chaos: ") else line


class KeepRunner(ChaosRunner):
    """`demo --keep`: at the end of the timeline the swarm goes on, pages up, until Ctrl-C;
    then the run ends as any other (its figures are the timeline's)."""

    async def _follow_timeline(self) -> None:
        await super()._follow_timeline()
        end = self.now()
        self.now = lambda: end  # type: ignore[method-assign] # the report ends with the timeline
        addr = next((p.addr for p in self.peers.values() if p.addr and p.alive()), None)
        page = f", its page at http://{addr}/" if addr else ""
        self._say(
            f"demo: the timeline is over (t={end:.0f} s); the swarm keeps training{page}: "
            "Ctrl-C stops it"
        )
        await until_ctrl_c()


async def until_ctrl_c() -> None:
    """Wait for one SIGINT (a second one, during the shutdown, interrupts as usual)."""
    loop = asyncio.get_running_loop()
    pressed = asyncio.Event()
    loop.add_signal_handler(signal.SIGINT, pressed.set)
    try:
        await pressed.wait()
    finally:
        loop.remove_signal_handler(signal.SIGINT)


SUMMARY_COLUMNS = ("peer", "peer id", "steps", "trained", "joined at", "test acc", "test loss",
                   "at step", "rounds")  # fmt: skip


def summary_table(summaries: dict[str, list[str]]) -> str:
    """One row per peer from the summary of its latest start (`--summary-json`): its own
    figures as it stopped. A start that was killed wrote none: the row says so."""
    rows = []
    for name, paths in summaries.items():
        s = read_summary(paths[-1]) if paths else None
        if s is None:
            rows.append([name, "-", "no summary: not started, or stopped without one"])
            continue
        rows.append([name, str(s.get("peer_id", "-"))[:12], _int(s.get("steps")),
                     _int(s.get("steps_this_run")), _int(s.get("joined_at_step")),
                     _fmt(s.get("test_accuracy"), ".1%"), _fmt(s.get("test_loss"), ".4f"),
                     _int(s.get("eval_step")), _int(s.get("exchange_rounds"))])  # fmt: skip
    full = [r for r in rows if len(r) == len(SUMMARY_COLUMNS)]
    widths = [max(len(r[i]) for r in [SUMMARY_COLUMNS, *full]) for i in range(len(SUMMARY_COLUMNS))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(SUMMARY_COLUMNS, widths, strict=True))]
    lines.append("  ".join("-" * w for w in widths))
    for r in rows:
        lines.append("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=False)).rstrip())
    return "\n".join(lines)


def read_summary(path: str) -> dict[str, Any] | None:
    try:
        summary = json.loads(Path(path).read_text())
    except (OSError, ValueError):
        return None
    return summary if isinstance(summary, dict) else None


def _int(x: Any) -> str:
    return str(x) if isinstance(x, int) and not isinstance(x, bool) else "-"


def _fmt(x: Any, spec: str) -> str:
    number = isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)
    return format(x, spec) if number else "-"
