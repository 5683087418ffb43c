"""`swarmnode demo`: a friendly 4-peer swarm on the bundled digits, one peer joining late.

The scenario is built in (scripts/ is not installed with the package); scripts/scenarios/demo.toml
holds the same text, and a test keeps the two equal. It runs through the chaos runner, so it
prints one progress line per second, a final table, and leaves report.json and plot.png in
./runs/demo-<timestamp>/ (or --report DIR).
"""

from __future__ import annotations

import argparse
import shlex
from typing import Any

from fault.scenario import Scenario, parse_scenario_text
from node.cmd_chaos import default_report_dir, run_scenario
from node.status_table import format_status_table

HELP = "run a small local swarm on the bundled digits with live progress and a final table"

DEMO_TOML = """\
# The `swarmnode demo` swarm (node/cmd_demo.py ships the same text). No faults: four peers on
# 127.0.0.1 gossip-average an MLP on the bundled digits; d joins late and must catch up.
# Every key is documented in fault/scenario.py.

[scenario]
name = "demo"
description = "4 peers learn the bundled digits together; d joins at t=10 s and catches up"
duration = 40

[node]
model = "mlp:64"
data = "digits"
steps = 0
eval_every = 50
checkpoint_every = 200
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
min = 0.85
[[assert]]
kind = "catch_up"
within = 0.05
"""


def demo_scenario() -> Scenario:
    return parse_scenario_text(DEMO_TOML, source="swarmnode demo", default_name="demo")


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "demo",
        help=HELP,
        description=__doc__.split("\n\n")[0],
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    p.add_argument(
        "--report", metavar="DIR", default=None, help="default: ./runs/demo-<timestamp>/"
    )
    p.add_argument("--peer-command", default=None, help=argparse.SUPPRESS)  # tests only
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    scenario = demo_scenario()
    code, runner = run_scenario(
        scenario,
        args.report or default_report_dir(scenario.name),
        command=shlex.split(args.peer_command) if args.peer_command else None,
    )
    seen_by = next(iter(runner.last_status), None)  # peers in scenario order: a, the seed, first
    if seen_by is not None:
        print(f"\nthe swarm as peer {seen_by} last saw it:")
        print(format_status_table(runner.last_status[seen_by]))
    return code
