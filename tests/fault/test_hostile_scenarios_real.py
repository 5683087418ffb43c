"""The short hostile scenarios against real peer processes (`swarmnode chaos` in CI): the chaos
runner drives each attacker of swarmnode.fault.hostile against real peers, and the report shows
the attack really ran (its own counts) and got nothing through."""

from __future__ import annotations

import pytest

from tests.fault.test_scenarios_real import run_short

pytestmark = [pytest.mark.slow, pytest.mark.timeout(120)]


def _attack(report: dict) -> dict:
    (attack,) = report["hostile"]
    assert attack["accepted"] == 0
    return attack


async def test_sybil_flood_short(tmp_path):
    report = await run_short("sybil-flood-short", tmp_path / "run")
    attack = _attack(report)
    assert attack["messages"] >= 5 and attack["statuses"].get("gossip 200", 0) >= 5
    assert attack["statuses"].get("join 403", 0) >= 5  # untrusted keys: every join refused
    assert report["peers"]["a"]["argv"].count("--trust") == 1


async def test_slow_bodies_short(tmp_path):
    report = await run_short("slow-bodies-short", tmp_path / "run")
    attack = _attack(report)
    assert attack["peak_open"] >= 90  # the attack was on: nearly all 100 connections at once


async def test_forged_records_short(tmp_path):
    report = await run_short("forged-records-short", tmp_path / "run")
    attack = _attack(report)
    assert attack["captured"]  # it forged from the victim's real record, not only made-up ones
    assert attack["messages"] >= 40 and attack["observations"] >= 20
