"""The accuracy and training assertions: final_accuracy, accuracy_drop, keeps_training, catch_up.

Each reads the peers' sampled test accuracy or step counter around the scenario's events (see
swarmnode.fault.chaos.assertions for the kinds' keys and defaults)."""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping
from typing import Any

from swarmnode.fault.chaos.record import (
    BACK_ACTIONS,
    FAULT_ACTIONS,
    OUTAGE_ENDS,
    OUTAGE_STARTS,
    Result,
    RunRecord,
    ScenarioView,
    first_event,
    honest_peers,
    longest_stall,
    missing_note,
    rejoined,
    running_at_end,
)


def _acc_window(
    samples: list[dict[str, Any]], t1: float, window: float, t0: float = -math.inf
) -> float | None:
    """Mean accuracy of the ok samples in [t1 - window, t1] (or the last one before t1)."""
    good = [s for s in samples if s.get("ok") and s.get("acc") is not None and t0 <= s["t"] <= t1]
    if not good:
        return None
    inside = [s["acc"] for s in good if s["t"] >= t1 - window]
    return statistics.fmean(inside) if inside else float(good[-1]["acc"])


def final_accuracy(scenario: ScenarioView, record: RunRecord, p: Mapping[str, Any]) -> Result:
    peers = p["peers"] or running_at_end(scenario, record, honest_peers(scenario))
    per = {n: _acc_window(record.samples.get(n, []), record.end_t, p["window"]) for n in peers}
    known = [v for v in per.values() if v is not None]
    measured = min(known) if known and len(known) == len(per) else None
    return Result(
        "final_accuracy",
        f"lowest final accuracy of {', '.join(peers) or 'no peer'} >= {p['min']:.3f}",
        measured,
        p["min"],
        ">=",
        False,
        detail=missing_note(per),
        per_peer=per,
    )


def _survivors(scenario: ScenarioView, p: Mapping[str, Any]) -> list[str]:
    """The peers an outage must not hurt: given, or the honest peers no event targets."""
    touched = {e.peer for e in scenario.events if e.peer}
    return p["peers"] or [n for n in honest_peers(scenario) if n not in touched]


def _window_end(
    scenario: ScenarioView, record: RunRecord, p: Mapping[str, Any], index: int, default: float
) -> float:
    """When the observed window after event `index` closes: the `until` event, or `default`."""
    if p.get("until"):
        until = next(i for i, e in enumerate(scenario.events) if e.id == p["until"])
        return record.event_time(scenario, until)
    return default


def accuracy_drop(scenario: ScenarioView, record: RunRecord, p: Mapping[str, Any]) -> Result:
    index = first_event(scenario, p, FAULT_ACTIONS)[0]
    event = scenario.events[index]
    t_e = record.event_time(scenario, index)
    t_end = _window_end(scenario, record, p, index, record.end_t)
    per: dict[str, Any] = {}
    levels: dict[str, Any] = {}
    for name in _survivors(scenario, p):
        samples = record.samples.get(name, [])
        before = _acc_window(samples, t_e - 1e-9, p["window"])
        # The lowest point, not the end: a survivor that dips and recovers still lost accuracy.
        during = [s for s in _acc_samples(samples) if t_e <= s["t"] <= t_end]
        low = min(during, key=lambda s: s["acc"], default=None)
        if before is None or low is None:
            per[name] = None
            continue
        per[name] = before - low["acc"]
        levels[name] = {"before": before, "lowest": low["acc"], "lowest_t": low["t"]}
    known = [v for v in per.values() if v is not None]
    return Result(
        "accuracy_drop",
        f"survivors' lowest accuracy in [{t_e:.0f} s, {t_end:.0f} s] ('{event.label}' on) stays "
        f"within {p['max_drop']:.3f} of their level before it",
        max(known) if known and len(known) == len(per) else None,
        p["max_drop"],
        "<=",
        False,
        detail=missing_note(per),
        per_peer=per,
        facts={"from_t": t_e, "until_t": t_end, "levels": levels},
    )


def keeps_training(scenario: ScenarioView, record: RunRecord, p: Mapping[str, Any]) -> Result:
    index = first_event(scenario, p, OUTAGE_STARTS)[0]
    event = scenario.events[index]
    t_e = record.event_time(scenario, index)
    t_end = _window_end(scenario, record, p, index, _outage_end(scenario, record, index))
    per: dict[str, Any] = {}
    advanced: dict[str, Any] = {}
    for name in _survivors(scenario, p):
        window = [
            s
            for s in record.samples.get(name, [])
            if s.get("ok") and s.get("step") is not None and t_e <= s["t"] <= t_end
        ]
        if len(window) < 2:
            per[name] = None  # not answering through the outage: it cannot be shown to train
            continue
        advanced[name] = int(window[-1]["step"]) - int(window[0]["step"])
        stall = longest_stall(window, "step")
        per[name] = stall if advanced[name] > 0 else math.inf
    known = [v for v in per.values() if v is not None]
    return Result(
        "keeps_training",
        f"survivors' step counters never stand still longer than {p['max_stall']:g} s in "
        f"[{t_e:.0f} s, {t_end:.0f} s] ('{event.label}' on)",
        max(known) if known and len(known) == len(per) else None,
        p["max_stall"],
        "<=",
        False,
        detail=missing_note(per, "step"),
        per_peer=per,
        facts={"from_t": t_e, "until_t": t_end, "steps_advanced": advanced},
    )


def _outage_end(scenario: ScenarioView, record: RunRecord, index: int) -> float:
    """The first restart/join/thaw/heal after event `index` (the end of the run if none)."""
    for j in range(index + 1, len(scenario.events)):
        if scenario.events[j].action in OUTAGE_ENDS:
            return record.event_time(scenario, j)
    return record.end_t


def catch_up(scenario: ScenarioView, record: RunRecord, p: Mapping[str, Any]) -> Result:
    targets = p["peers"] or rejoined(scenario)
    honest = running_at_end(scenario, record, honest_peers(scenario))
    final = {n: _acc_window(record.samples.get(n, []), record.end_t, p["window"]) for n in honest}
    per: dict[str, Any] = {}
    why: list[str] = []
    for name in targets:
        mine, reason = _acc_since_back(scenario, record, name, p["window"])
        others = [v for n, v in final.items() if n != name and v is not None]
        if mine is None:
            why.append(reason)
        elif not others:
            why.append(f"no other honest peer answering at the end to compare {name} with")
        per[name] = abs(mine - statistics.median(others)) if mine is not None and others else None
    known = [v for v in per.values() if v is not None]
    measured = max(known) if known and len(known) == len(per) else None
    return Result(
        "catch_up",
        f"{', '.join(targets)} end within {p['within']:.3f} of the other honest peers' median",
        measured,
        p["within"],
        "<=",
        False,
        detail="; ".join(why),
        per_peer=per,
    )


def _acc_since_back(
    scenario: ScenarioView, record: RunRecord, name: str, window: float
) -> tuple[float | None, str]:
    """(mean accuracy at the end, "") of a peer that came back, or (None, why not).

    Only samples after its last restart/join/thaw count: one from before its outage is the
    accuracy of a process that no longer exists. It must be running at the end and have
    answered in the final window (at least 1.5 sample intervals, so one lost sample is
    forgiven), else it did not catch up, whatever it scored before."""
    state = record.final_state.get(name)
    if state != "running":
        return None, f"{name} is {state or 'not started'} at the end, not running"
    back = [
        float(e["t"])
        for e in record.timeline
        if e.get("peer") == name and e.get("action") in BACK_ACTIONS and e.get("ok", True)
    ]
    t_back = max(back, default=-math.inf)
    t_from = max(t_back, record.end_t - max(window, 1.5 * scenario.sample_every))
    recent = [s["acc"] for s in _acc_samples(record.samples.get(name, [])) if s["t"] >= t_from]
    if not recent:
        since = f" since it came back at t={t_back:.1f} s" if back else ""
        return None, f"{name} reported no accuracy in the final window{since}"
    return statistics.fmean(recent), ""


def _acc_samples(samples: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [s for s in samples if s.get("ok") and s.get("acc") is not None]
