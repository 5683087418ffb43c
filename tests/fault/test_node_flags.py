"""The scenario's flag lists against the real `swarmnode start` parser.

fault/ must not import node, so swarmnode.fault.chaos.scenario keeps its own allow-list of node
flags; this test (tests may import node) keeps that list honest: every flag a scenario may set,
and every flag the runner passes itself, exists in `swarmnode start`.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest
from swarmnode.fault.chaos.scenario import NODE_FLAGS, RUNNER_FLAGS, parse_scenario_text
from swarmnode.fault.chaos.supervisor import Supervisor
from swarmnode.node.cli.command import build_parser

pytestmark = pytest.mark.timeout(60)


def start_flags() -> set[str]:
    """The long option names of `swarmnode start`, without the leading `--`."""
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    start = sub.choices["start"]
    return {
        opt[2:] for action in start._actions for opt in action.option_strings if opt[:2] == "--"
    }


@pytest.mark.parametrize("flag", sorted(NODE_FLAGS | RUNNER_FLAGS))
def test_every_listed_flag_exists_in_swarmnode_start(flag):
    assert flag in start_flags()


@pytest.mark.slow  # spawns `true` as the peer command
def test_every_flag_the_runner_passes_exists_in_swarmnode_start(tmp_path: Path):
    scenario = parse_scenario_text(
        "[scenario]\nduration = 5\n[node]\nmodel = 'mlp:8'\n"
        "[[peer]]\nname = 'a'\n[[peer]]\nname = 'b'\n"
    )
    supervisor = Supervisor(scenario, tmp_path, ["true"], None)
    supervisor.spawn(supervisor.peers["b"], ["127.0.0.1:1"])  # `true` exits at once
    supervisor.kill_all_now()
    argv = supervisor.peers["b"].argv[1:]
    passed = {arg[2:] for arg in argv if arg.startswith("--")}
    assert {"listen", "ready-file", "checkpoint-dir", "shard", "join", "model"} <= passed
    assert passed <= start_flags(), passed - start_flags()
