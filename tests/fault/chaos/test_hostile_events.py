"""`action = "hostile"` events, `admission = "trust"`, and the hostile assertions on synthetic
samples (the real runs are in test_hostile_scenarios_real.py)."""

from __future__ import annotations

from typing import Any

import pytest
from swarmnode.fault.chaos.assertions import RunRecord, evaluate
from swarmnode.fault.chaos.scenario import ScenarioError, parse_scenario_text

pytestmark = pytest.mark.timeout(30)

BASE = """
[scenario]
duration = 30
[[peer]]
name = "a"
[[peer]]
name = "b"
[[peer]]
name = "c"
"""
SYBILS = "[[event]]\nat = 10\naction = 'hostile'\nkind = 'sybil-flood'\npeer = 'a'\nid = 'x'\n"


def test_a_hostile_event_and_its_defaults() -> None:
    sc = parse_scenario_text(BASE + SYBILS)
    (e,) = sc.events
    assert (e.kind, e.peer, e.count, e.rate, e.duration) == ("sybil-flood", "a", 1000, 2.0, 20.0)
    assert e.label == "sybil-flood on a" and not sc.trust
    forged = "kind = 'forged-records'\nvictim = 'b'\nrate = 5\nduration = 4\n"
    (e,) = parse_scenario_text(BASE + SYBILS.replace("kind = 'sybil-flood'\n", forged)).events
    assert (e.victim, e.rate, e.duration, e.count) == ("b", 5.0, 4.0, 1)
    text = BASE.replace("duration = 30", "duration = 30\nadmission = 'trust'")
    assert parse_scenario_text(text).trust


@pytest.mark.parametrize(
    ("change", "why"),
    [
        ("kind = 'nuke'", "unknown kind 'nuke'"),
        ("kind = 'forged-records'", "needs 'peer'"),
        ("kind = 'forged-records'\nvictim = 'a'", "another peer than the target"),
        ("kind = 'sybil-flood'\nvictim = 'b'", "'victim' is for kind"),
        ("kind = 'sybil-flood'\ncount = 2.5", "whole number"),
        ("kind = 'sybil-flood'\nduration = 25", "outside"),
        ("kind = 'sybil-flood'\nrate = 0", "outside"),
    ],
)
def test_bad_hostile_events_are_refused_before_anything_runs(change: str, why: str) -> None:
    with pytest.raises(ScenarioError, match=why):
        parse_scenario_text(BASE + SYBILS.replace("kind = 'sybil-flood'", change))


def test_only_trust_admission_is_set_by_a_scenario() -> None:
    with pytest.raises(ScenarioError, match="only 'trust'"):
        parse_scenario_text(BASE.replace("duration = 30", "duration = 30\nadmission = 'open'"))
    with pytest.raises(ScenarioError, match="needs a hostile event"):
        parse_scenario_text(BASE + "[[assert]]\nkind = 'exchange_rate'\n")


def _samples(applied_per_s: dict[str, list[float]], b_state: str = "alive") -> dict[str, Any]:
    """One sample a second; `applied` grows at the given rate over [0, 10) then [10, 20)."""
    out: dict[str, list[dict[str, Any]]] = {}
    for name, (before, during) in applied_per_s.items():
        applied, rows = 0.0, []
        for t in range(21):
            members = {"id-b": b_state if t >= 10 else "alive"}
            members |= {f"sybil{i}": "alive" for i in range(3)}
            rows.append({"t": float(t), "ok": True, "applied": applied, "members": members})
            applied += before if t < 10 else during
        out[name] = rows
    return out


def _record(samples: dict[str, Any], accepted: int = 0) -> RunRecord:
    return RunRecord(
        samples=samples,
        distances=[],
        timeline=[],
        peer_ids={n: [f"id-{n}"] for n in "abc"},
        final_state=dict.fromkeys("abc", "running"),
        end_t=30.0,
        hostile=[
            {
                "kind": "sybil-flood",
                "peer": "a",
                "id": "x",
                "start": 10.0,
                "end": 20.0,
                "accepted": accepted,
            }
        ],
    )


ASSERTS = """
[[assert]]
kind = "exchange_rate"
baseline = 10
[[assert]]
kind = "victim_alive"
peer = "b"
[[assert]]
kind = "hostile_accepted"
[[assert]]
kind = "member_cap"
max = 3
"""


def test_the_exchange_rate_baseline_is_before_and_after_the_attack() -> None:
    sc = parse_scenario_text(BASE + SYBILS + "[[assert]]\nkind = 'exchange_rate'\nbaseline = 5\n")
    samples = _samples({"a": (4.0, 3.0)})  # 4/s before, 3/s from t = 10 on
    samples["a"] = [s for s in samples["a"] if s["t"] <= 10] + [
        {**s, "applied": 40 + 3 * (s["t"] - 10) - (0 if s["t"] <= 15 else (s["t"] - 15))}
        for s in samples["a"]
        if s["t"] > 10
    ]  # 3/s during [10, 15], 2/s after: the load drifted, the attack did nothing
    rec = _record(samples)
    rec.hostile[0]["end"] = 15.0
    (rate,) = evaluate(sc, rec)
    assert rate.facts["window_rates"] == [pytest.approx(4.0), pytest.approx(2.0)]
    assert rate.measured == pytest.approx(3.0 / 3.0)


def test_the_hostile_assertions_read_the_attack_window() -> None:
    sc = parse_scenario_text(BASE + SYBILS + ASSERTS)
    rec = _record(_samples({"a": (2.0, 1.9), "b": (2.0, 1.9), "c": (2.0, 1.8)}))
    rate, alive, accepted, cap = evaluate(sc, rec)
    assert rate.measured == pytest.approx(5.6 / 6.0) and rate.status == "pass"
    # before: [0, 10]; after it, no sample past t = 20: no rate there
    assert rate.facts["windows"] == [[0.0, 10.0], [20.0, 30.0]]
    assert rate.facts["window_rates"][1] is None
    assert rate.facts["during"] == [10.0, 20.0]
    assert alive.per_peer == {"a": 1.0, "c": 1.0} and alive.status == "pass"
    assert accepted.measured == 0 and accepted.status == "pass"
    assert cap.measured == 4 and cap.status == "fail"  # b and three sybils listed

    rec = _record(_samples({"a": (2.0, 0.5), "b": (2.0, 2.0), "c": (2.0, 2.0)}, "left"), 3)
    rate, alive, accepted, _ = evaluate(sc, rec)
    assert rate.status == "fail" and rate.measured == pytest.approx(4.5 / 6.0)
    assert alive.measured == 0.0 and alive.status == "fail"  # shown left from t = 10 on
    assert accepted.measured == 3 and accepted.status == "fail"
