"""`swarmnode demo`: a friendly 4-peer swarm on the bundled digits, one peer joining late.

The scenario is built in (scripts/ is not installed with the package); scripts/scenarios/demo.toml
holds the same text, and a test keeps the two equal. It runs through the chaos runner, so it
prints one progress line per second, a final table, and leaves report.json and plot.png in
./runs/demo-<timestamp>/ (or --report DIR). `--quick` runs the same swarm for 15 s with d joining
at t=5 s: a smoke test of the whole stack in about half a minute.
"""

from __future__ import annotations

import argparse
import dataclasses
import shlex
from typing import Any

from swarmnode.fault.chaos.scenario import Scenario, parse_scenario_text
from swarmnode.node.cli.cmd_chaos import default_report_dir, run_scenario
from swarmnode.node.cli.start_options import check_node_table
from swarmnode.node.cli.status_table import format_status_table

HELP = "run a small local swarm on the bundled digits with live progress and a final table"

DEMO_TOML = """\
# The `swarmnode demo` swarm (node/cli/cmd_demo.py ships the same text). No faults: four peers on
# 127.0.0.1 gossip-average an MLP on the bundled digits; d joins late and must catch up.
# Every key is documented in fault/chaos/scenario.py.

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


# --quick: the digits MLP is past 90% within seconds of its start, and a joiner syncs its state
# from the swarm when it joins, so 10 s after the join are enough for both bars.
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
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    p.add_argument(
        "--report", metavar="DIR", default=None, help="default: ./runs/demo-<timestamp>/"
    )
    p.add_argument(
        "--quick",
        action="store_true",
        help=f"a {QUICK_DURATION:g} s run, d joining at t={QUICK_JOIN_AT:g} s (a smoke test)",
    )
    p.add_argument("--peer-command", default=None, help=argparse.SUPPRESS)  # tests only
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    scenario = demo_scenario(quick=args.quick)
    code, runner = run_scenario(
        scenario,
        args.report or default_report_dir(scenario.name),
        command=shlex.split(args.peer_command) if args.peer_command else None,
    )
    # a, the seed, when it answered: last_status fills in the order answers came back
    seen_by = next((p.name for p in scenario.peers if p.name in runner.last_status), None)
    if seen_by is not None:
        print(f"\nthe swarm as peer {seen_by} last saw it:")
        print(format_status_table(runner.last_status[seen_by]))
    return code
