"""The hostile assertions: member_cap, victim_alive, exchange_rate, hostile_accepted.

Each reads the peers' samples around the attacks of `hostile` events (their actual start and
end, from the actors' reports in `RunRecord.hostile`), or the reports themselves (see
swarmnode.fault.chaos.assertions for the kinds' keys and defaults)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from swarmnode.fault.chaos.record import Result, RunRecord, ScenarioView, honest_peers

MIN_WINDOW_S = 3.0  # a baseline window shorter than this (the run ended) is left out


def member_cap(scenario: ScenarioView, record: RunRecord, p: Mapping[str, Any]) -> Result:
    per: dict[str, Any] = {}
    for name in p["peers"] or honest_peers(scenario):
        counts = [len(s.get("members") or {}) for s in record.samples.get(name, []) if s["ok"]]
        per[name] = max(counts) if counts else None
    text = f"no honest peer lists more than {p['max']} members"
    return Result.over_peers("member_cap", text, per, max, p["max"], "<=")


def victim_alive(scenario: ScenarioView, record: RunRecord, p: Mapping[str, Any]) -> Result:
    """The share of each honest observer's samples, during the attack, in which it lists the
    victim alive; the victim is `peer`, else the forged-records event's victim or the target."""
    attack = _attack(scenario, record, p)
    victim = p["peer"] or (attack.get("victim_name") or attack.get("peer"))
    ids = set(record.peer_ids.get(victim, []))
    per: dict[str, Any] = {}
    for name in honest_peers(scenario):
        window = [
            s
            for s in record.samples.get(name, [])
            if s["ok"] and attack["start"] <= s["t"] <= attack["end"]
        ]
        if name == victim or not window:
            continue
        alive = [any(s["members"].get(i) == "alive" for i in ids) for s in window]
        per[name] = sum(alive) / len(alive)
    return Result(
        "victim_alive",
        f"every honest peer lists {victim} alive in at least {p['min_share']:.0%} of its "
        f"samples during the {attack.get('kind')} attack",
        min(per.values()) if per else None,
        p["min_share"],
        ">=",
        False,
        per_peer=per,
        facts={"victim": victim, "start": attack["start"], "end": attack["end"]},
    )


def exchange_rate(scenario: ScenarioView, record: RunRecord, p: Mapping[str, Any]) -> Result:
    """Honest exchange rounds applied per second (summed over `peers`) during the attack,
    against the `baseline` seconds (default: as long as the attack) before it and after it:
    the mean of the two cancels a drift of the shared box's load over the run (measured: the
    rate after an attack was often lower than during it); without room after, before only."""
    attack = _attack(scenario, record, p)
    start, end = attack["start"], attack["end"]
    span = p["baseline"] or end - start
    peers = p["peers"] or honest_peers(scenario)
    windows = [(max(0.0, start - span), start), (end, min(record.end_t, end + span))]
    rates = [_rate(record, peers, *w) for w in windows if w[1] - w[0] >= MIN_WINDOW_S]
    known = [r for r in rates if r is not None]
    base = sum(known) / len(known) if known else None
    during = _rate(record, peers, start, end)
    ratio = during / base if base and during is not None else None
    return Result(
        "exchange_rate",
        f"the honest peers apply at least {p['min_ratio']:.0%} of the exchange rounds a second "
        f"they applied in the {span:.0f} s around the {attack.get('kind')} attack",
        ratio,
        p["min_ratio"],
        ">=",
        False,
        facts={
            "baseline_per_s": base,
            "during_per_s": during,
            "windows": [list(w) for w in windows],
            "window_rates": rates,
            "during": [start, end],
        },
    )


def hostile_accepted(scenario: ScenarioView, record: RunRecord, p: Mapping[str, Any]) -> Result:
    """What the attacks got through, by their own count (sybils listed, forged claims shown)."""
    reports = [r for r in record.hostile if p["after"] in (None, r.get("id"))]
    per = {f"{r['kind']} on {r['peer']} @{r['start']:.0f}s": r.get("accepted") for r in reports}
    text = f"the attacks get at most {p['max']} of their records or claims accepted"
    facts = {"reports": reports}
    return Result.over_peers("hostile_accepted", text, per, sum, p["max"], "<=", facts=facts)


def _attack(scenario: ScenarioView, record: RunRecord, p: Mapping[str, Any]) -> dict[str, Any]:
    """The actor report of the event `after` names (default: the first attack), with the
    victim's scenario name; its scheduled span when the actor never reported."""
    events = [e for e in scenario.events if e.action == "hostile"]
    event = next(e for e in events if p.get("after") in (None, e.id))
    found = [r for r in record.hostile if r.get("id") == event.id and r.get("kind") == event.kind]
    report = (
        dict(found[0])
        if found
        else {
            "kind": event.kind,
            "peer": event.peer,
            "start": event.at,
            "end": event.at + event.duration,
        }
    )
    report["victim_name"] = event.victim
    return report


def _rate(record: RunRecord, peers: list[str], t0: float, t1: float) -> float | None:
    """Rounds applied a second over [t0, t1], summed over `peers` (None: no data)."""
    total, any_data = 0.0, False
    for name in peers:
        window = [
            s
            for s in record.samples.get(name, [])
            if s["ok"] and s.get("applied") is not None and t0 <= s["t"] <= t1
        ]
        if len(window) >= 2 and window[-1]["t"] > window[0]["t"]:
            span = window[-1]["t"] - window[0]["t"]
            total += (window[-1]["applied"] - window[0]["applied"]) / span
            any_data = True
    return total if any_data else None
