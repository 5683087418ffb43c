"""Scenario text shared by the scenario-file and assertion tests."""

from __future__ import annotations

from pathlib import Path

from swarmnode.fault.chaos.scenario import parse_scenario_text

SCENARIOS = Path(__file__).resolve().parents[3] / "scripts" / "scenarios"

KILL_A = "[[event]]\nat = 5\naction = 'kill'\npeer = 'a'\nid = 'k'\n"

BASE = """
[scenario]
name = "t"
duration = 30

[node]
model = "mlp:64"
exchange_timeout = 2.0

[[peer]]
name = "a"
[[peer]]
name = "b"
byzantine = "alie"
[[peer]]
name = "c"
"""


def parse(extra: str = "", base: str = BASE):
    return parse_scenario_text(base + extra, source="t.toml")
