"""The control assertions: control_accuracy, control_rounds (issue 22).

Each compares the run with its control swarm (swarmnode.fault.chaos.control: the same swarm on
the same box at the same time, the attacker's seat held by an honest slow peer), over the peers
honest in both, so the box's load cancels out: an attack passes when it costs the honest peers
no more than a slow peer does, within the bar. A run without its control's record (the control
did not complete) fails these, saying why."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from swarmnode.fault.chaos.assertions.accuracy import _acc_window
from swarmnode.fault.chaos.assertions.hostile import _rate
from swarmnode.fault.chaos.record import Result, RunRecord, ScenarioView, honest_peers, missing_note


def _peers(scenario: ScenarioView, p: Mapping[str, Any]) -> list[str]:
    """The peers compared: given, or those honest here (the control's seat is not one)."""
    seat = scenario.control.peer if scenario.control is not None else None
    return p["peers"] or [n for n in honest_peers(scenario) if n != seat]


def _no_control(record: RunRecord) -> str:
    return f"no control record (the control run ended: {record.control_result or 'not run'})"


def control_accuracy(scenario: ScenarioView, record: RunRecord, p: Mapping[str, Any]) -> Result:
    """(lowest accuracy of the peers here) - (lowest of the same peers in the control), each
    peer's the mean over `window` s up to `at` (default: the end of the run)."""
    peers = _peers(scenario, p)
    at = record.end_t if p["at"] is None else min(p["at"], record.end_t)
    text = (
        f"the lowest accuracy of {', '.join(peers)} at t={at:.0f} s is at most "
        f"{p['max_drop']:.3f} below the control's (the attacker's seat held by a slow peer)"
    )
    here = {n: _acc_window(record.samples.get(n, []), at, p["window"]) for n in peers}
    ctrl = record.control
    there = (
        {n: _acc_window(ctrl.samples.get(n, []), min(at, ctrl.end_t), p["window"]) for n in peers}
        if ctrl is not None
        else {}
    )
    measured = None
    detail = missing_note(here) or (
        missing_note(there) if ctrl is not None else _no_control(record)
    )
    if not detail:
        measured = min(here.values()) - min(there.values())  # type: ignore[type-var]
    return Result(
        "control_accuracy",
        text,
        measured,
        -p["max_drop"],
        ">=",
        False,
        detail=detail,
        per_peer=here,
        facts={"at": at, "control": there, "control_result": record.control_result},
    )


def control_rounds(scenario: ScenarioView, record: RunRecord, p: Mapping[str, Any]) -> Result:
    """Exchange rounds applied a second, summed over the peers, here / in the control, over
    [`from`, `until`] (default: the first hostile event's actual span, else the whole run)."""
    peers = _peers(scenario, p)
    t0, t1 = _span(scenario, record, p)
    text = (
        f"{', '.join(peers)} apply at least {p['min_ratio']:.0%} of the exchange rounds a second "
        f"the control's apply in [{t0:.0f} s, {t1:.0f} s]"
    )
    here = _rate(record, peers, t0, t1)
    ctrl = record.control
    there = _rate(ctrl, peers, t0, min(t1, ctrl.end_t)) if ctrl is not None else None
    ratio = here / there if here is not None and there else None
    detail = "" if ratio is not None else (_no_control(record) if ctrl is None else "no rounds")
    return Result(
        "control_rounds",
        text,
        ratio,
        p["min_ratio"],
        ">=",
        False,
        detail=detail,
        facts={"per_s": here, "control_per_s": there, "span": [t0, t1]},
    )


def _span(scenario: ScenarioView, record: RunRecord, p: Mapping[str, Any]) -> tuple[float, float]:
    if p["from"] is not None or p["until"] is not None:
        t0 = p["from"] if p["from"] is not None else 0.0
        return t0, min(record.end_t, p["until"] if p["until"] is not None else record.end_t)
    for r in record.hostile:
        return float(r["start"]), float(r["end"])
    attack = next((e for e in scenario.events if e.action == "hostile"), None)
    if attack is not None:
        return attack.at, min(record.end_t, attack.at + attack.duration)
    return 0.0, record.end_t
