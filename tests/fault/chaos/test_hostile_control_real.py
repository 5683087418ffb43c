"""The hostile insiders of issue 22 in the default configuration, each against its control swarm
(fault/chaos/control.py: the attacker's seat held by an honest peer ten times slower), run
through the chaos runner against real peer processes; each passes when the attack costs no more
than that slow peer. Before issue 22 all three failed by far (docs/architecture.md, "Trust").
~35 s each on a 2-core box.

A file of their own, apart from the four attacks of test_hostile_scenarios_real.py: `--dist
loadfile` gives a file to one worker, and the two files (~100-190 s each under load) balance
the two workers where the one file (~235 s) was the suite's longest. They run one after the
other: side by side they took 74 and 98 s in two loaded runs against 102 and 133 s one after
the other (the start-up noise is as large), and beside the drag the sybil flood listed 498 of
its 500 sybils, under the bar that shows the flood was on (docs/benchmarks.md, "The suite")."""

from __future__ import annotations

import pytest

from tests.fault.chaos.test_scenarios_real import run_short

pytestmark = [pytest.mark.slow, pytest.mark.flood, pytest.mark.timeout(180)]


def _control_ran(report: dict) -> None:
    assert report["control"] == {"result": "pass", "report": "control/report.json"}


async def test_a_drag_insider_costs_no_more_than_a_slow_peer_short(tmp_path):
    report = await run_short("hostile-drag-short", tmp_path / "run")
    _control_ran(report)
    (drag,) = report["hostile"]
    assert drag["joined"]  # a member under open admission, in its own name
    # the attack was on: ~150 pushes a second, answered like any push
    assert drag["pushes"] >= 600 and drag["statuses"].get("pushpull 200", 0) >= 600


async def test_sybils_from_many_addresses_cost_no_more_than_a_slow_peer_short(tmp_path):
    report = await run_short("hostile-sybils-short", tmp_path / "run")
    _control_ran(report)
    (flood,) = report["hostile"]
    assert flood["sources"] == 63
    # it filled the tables, as far as admission lets it: what it costs is the question. Half
    # a table (1,024): 923-1,021 listed in 5 runs at load 10-27; before its records' chains
    # were cut to the window, the attacker sent nothing in 3 of 3
    assert flood["listed_max"] >= 500, flood
    assert flood["held"] >= 1  # honest peers did reach its silent listeners


async def test_a_dissensus_liar_costs_no_more_than_a_slow_peer_short(tmp_path):
    report = await run_short("hostile-dissensus-short", tmp_path / "run")
    _control_ran(report)
    served = {s.get("byzantine") for s in report["samples"]["x"] if s.get("ok")}
    assert served == {"dissensus:epsilon=4.0"}  # the liar lied all along
