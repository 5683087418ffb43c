"""The short hostile scenarios against real peer processes (`swarmnode chaos` in CI): the chaos
runner drives each attacker of swarmnode.fault.hostile against real peers, and the report shows
the attack really ran (its own counts) and got nothing through. The insiders of issue 22, each
judged against a control swarm, are in test_hostile_control_real.py."""

from __future__ import annotations

import pytest
from swarmnode.fault.chaos.scenario import Scenario, parse_scenario_text
from swarmnode.node.settings import PeerConfig

from tests.fault.chaos.test_scenarios_real import SCENARIOS, run_side_by_side

pytestmark = [pytest.mark.slow, pytest.mark.flood, pytest.mark.timeout(180)]


def trimmed(name: str) -> Scenario:
    """`name` (4 peers at 100 steps a second, one 10 s attack from t=10 s, the end at t=30 s)
    with the calm before and after the attack cut from 10 s to 6 s each, the attack itself
    unchanged: 8 s less of four peers training. The swarm is up
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


# Two at a time: each timeline is fixed (22 s), so two swarms side by side wait it once; each
# judges its attack against its own phases before and after it (`exchange_rate`), under the
# same load. Asserted per run, each named in its message.
async def test_sybil_floods_from_outside_and_by_an_insider_short(tmp_path):
    closed, secret = await run_side_by_side(
        ("sybil-flood-short", tmp_path / "closed", trimmed("sybil-flood-short")),
        ("sybil-flood-secret-short", tmp_path / "secret", trimmed("sybil-flood-secret-short")),
    )
    # a closed swarm (`--admission trust`): nothing listed, every join refused
    attack = _attack(closed)
    assert attack["messages"] >= 5 and attack["statuses"].get("gossip 200", 0) >= 5, attack
    assert attack["statuses"].get("join 403", 0) >= 5, attack  # untrusted keys
    assert closed["peers"]["a"]["argv"].count("--trust") == 1
    # secret admission, the attacker holds the secret: its sybils get in, but at most the
    # per-host cap of them (all on 127.0.0.1 with the 3 other honest peers), and the honest
    # peers back off from them (the scenario's victim_alive and exchange_rate assertions)
    attack = _attack(secret, accepted=PeerConfig().max_members_per_host - 3)
    assert attack["messages"] >= 5 and attack["statuses"].get("gossip 200", 0) >= 5, attack
    assert attack["accepted"] >= 1, attack  # the control: an insider does get sybils listed
    assert "--trust" not in secret["peers"]["a"]["argv"]


async def test_slow_bodies_and_forged_records_short(tmp_path):
    slow, forged = await run_side_by_side(
        ("slow-bodies-short", tmp_path / "slow", trimmed("slow-bodies-short")),
        ("forged-records-short", tmp_path / "forged", trimmed("forged-records-short")),
    )
    attack = _attack(slow)
    assert attack["peak_open"] >= 90, attack  # the attack was on: nearly all 100 at once
    attack = _attack(forged)
    assert attack["captured"], attack  # forged from the victim's real record, not made-up ones
    assert attack["messages"] >= 40 and attack["observations"] >= 20, attack
