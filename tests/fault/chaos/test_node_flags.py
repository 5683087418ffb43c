"""The chaos scenario's option tables against the real `swarmnode start`.

fault/ must not import node, so `swarmnode chaos` passes `swarmnode start`'s own loader in
(`check_node_table`): a scenario's [node] and [[peer]] keys are exactly `--config`'s. This test
(tests may import node) keeps the runner's own flags honest: each exists in `swarmnode start`.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest
from swarmnode.fault.chaos.scenario import RUNNER_FLAGS, ScenarioError, parse_scenario_text
from swarmnode.fault.chaos.supervisor import Supervisor
from swarmnode.node.cli.command import build_parser
from swarmnode.node.settings import check_node_table

pytestmark = pytest.mark.timeout(60)


def start_flags() -> set[str]:
    """The long option names of `swarmnode start`, without the leading `--`."""
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    start = sub.choices["start"]
    return {
        opt[2:] for action in start._actions for opt in action.option_strings if opt[:2] == "--"
    }


@pytest.mark.parametrize("flag", sorted(RUNNER_FLAGS))
def test_every_flag_the_runner_sets_exists_in_swarmnode_start(flag):
    assert flag in start_flags()


def scenario(node: str) -> str:
    return f"[scenario]\nduration = 5\n[node]\n{node}\n[[peer]]\nname = 'a'\n"


@pytest.mark.parametrize(
    ("node", "fragment"),
    [
        ("lrr = 0.1", "[node]: unknown key 'lrr'; did you mean 'lr'?"),
        ("lr = 'abc'", "[node]: lr: expected a number, got 'abc'"),
        ("batch_size = 1.5", "batch_size: expected an integer"),
        ("exchange = 'gossip'", "'gossip' is not one of average, robust"),
        ("listen = '127.0.0.1:0'", "'listen' is set by the chaos runner"),
    ],
)
def test_node_tables_go_through_the_start_loader(node, fragment):
    with pytest.raises(ScenarioError) as info:
        parse_scenario_text(scenario(node), source="s.toml", node_check=check_node_table)
    assert fragment in str(info.value)


def test_any_start_option_may_be_set_and_keeps_its_form():
    text = scenario("compress = 'int8'\nbatch_size = 16\nprefer_fast = 0.5")
    sc = parse_scenario_text(text, node_check=check_node_table)
    assert sc.flags_for("a") == {"compress": "int8", "batch-size": 16, "prefer-fast": 0.5}


@pytest.mark.slow  # spawns `true` as the peer command
def test_every_flag_the_runner_passes_exists_in_swarmnode_start(tmp_path: Path):
    scenario = parse_scenario_text(
        "[scenario]\nduration = 5\n[node]\nmodel = 'mlp:8'\n"
        "[[peer]]\nname = 'a'\n[[peer]]\nname = 'b'\n",
        node_check=check_node_table,
    )
    supervisor = Supervisor(scenario, tmp_path, ["true"], None)
    supervisor.spawn(supervisor.peers["b"], ["127.0.0.1:1"])  # `true` exits at once
    supervisor.kill_all_now()
    argv = supervisor.peers["b"].argv[1:]
    passed = {arg[2:] for arg in argv if arg.startswith("--")}
    assert {"listen", "ready-file", "checkpoint-dir", "shard", "join", "model"} <= passed
    assert passed <= start_flags(), passed - start_flags()
