"""The short hostile scenarios against real peer processes (`swarmnode chaos` in CI): the chaos
runner drives each attacker of swarmnode.fault.hostile against real peers, and the report shows
the attack really ran (its own counts) and got nothing through. The insiders of issue 22, each
judged against a control swarm, are in test_hostile_control_real.py."""

from __future__ import annotations

import pytest
from swarmnode.fault.chaos.scenario import Scenario, parse_scenario_text
from swarmnode.node.settings import PeerConfig

from tests.fault.chaos.test_scenarios_real import SCENARIOS, run_short

pytestmark = [pytest.mark.slow, pytest.mark.timeout(120)]


def trimmed(name: str) -> Scenario:
    """`name` (4 peers at full speed, one 10 s attack from t=10 s, the end at t=30 s) with the
    calm before and after the attack cut from 10 s to 6 s each, the attack itself unchanged:
    8 s less of four peers training at full speed, which take the whole CPU. The swarm is up
    at t=0 (the runner starts its clock once every peer is ready), and `exchange_rate` still
    has a window on each side (6 s, its minimum is 3 s)."""
    path = SCENARIOS / f"{name}.toml"
    text = path.read_text(encoding="utf-8")
    for old, new in (("duration = 30\n", "duration = 22\n"), ("at = 10\n", "at = 6\n")):
        assert text.count(old) == 1, (name, old)  # the layout this trim was written for
        text = text.replace(old, new)
    text = text.replace("from t=10 s", "from t=6 s")  # the description, as the report shows it
    return parse_scenario_text(text, source=str(path), default_name=name)


def _attack(report: dict, accepted: int = 0) -> dict:
    (attack,) = report["hostile"]
    assert attack["accepted"] <= accepted
    return attack


async def test_sybil_flood_short(tmp_path):
    report = await run_short("sybil-flood-short", tmp_path / "run", trimmed("sybil-flood-short"))
    attack = _attack(report)
    assert attack["messages"] >= 5 and attack["statuses"].get("gossip 200", 0) >= 5
    assert attack["statuses"].get("join 403", 0) >= 5  # untrusted keys: every join refused
    assert report["peers"]["a"]["argv"].count("--trust") == 1


async def test_sybil_flood_by_an_insider_short(tmp_path):
    # secret admission, the attacker holds the secret: its sybils get in, but at most the
    # per-host cap of them (all on 127.0.0.1 with the 3 other honest peers), and the honest
    # peers back off from them (the scenario's victim_alive and exchange_rate assertions)
    report = await run_short(
        "sybil-flood-secret-short", tmp_path / "run", trimmed("sybil-flood-secret-short")
    )
    attack = _attack(report, accepted=PeerConfig().max_members_per_host - 3)
    assert attack["messages"] >= 5 and attack["statuses"].get("gossip 200", 0) >= 5
    assert attack["accepted"] >= 1  # the control: an insider does get sybils listed
    assert "--trust" not in report["peers"]["a"]["argv"]


async def test_slow_bodies_short(tmp_path):
    report = await run_short("slow-bodies-short", tmp_path / "run", trimmed("slow-bodies-short"))
    attack = _attack(report)
    assert attack["peak_open"] >= 90  # the attack was on: nearly all 100 connections at once


async def test_forged_records_short(tmp_path):
    report = await run_short(
        "forged-records-short", tmp_path / "run", trimmed("forged-records-short")
    )
    attack = _attack(report)
    assert attack["captured"]  # it forged from the victim's real record, not only made-up ones
    assert attack["messages"] >= 40 and attack["observations"] >= 20
