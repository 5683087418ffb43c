"""The swarm-shape assertions: membership, reconverge, merge.

Each reads what the peers list in their member tables, or the sampled model distances, after a
kill or a partition's heal (see swarmnode.fault.chaos.assertions for the kinds' keys)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from swarmnode.fault.chaos.record import (
    PEER_LIFECYCLE,
    Result,
    RunRecord,
    ScenarioView,
    first_event,
    running_at_end,
)


def membership(scenario: ScenarioView, record: RunRecord, p: Mapping[str, Any]) -> Result:
    per: dict[str, Any] = {}
    for index in first_event(scenario, p, ("kill", "terminate")):
        event = scenario.events[index]
        t_e = record.event_time(scenario, index)
        t_stop = _next_start(scenario, record, event.peer, index)
        ids = set(record.peer_ids.get(event.peer, []))
        for name, samples in record.samples.items():
            if name == event.peer or not any(s["t"] <= t_e for s in samples):
                continue  # the target itself, or a peer that joined after the event
            # The observer's own view ends when the runner stops it (killed with the target,
            # say): what it lists after its restart is hearsay from the others, not detection.
            t_blind = _stopped_at(record, name, t_e)
            end = min(t_stop, t_blind)
            window = [s for s in samples if s.get("ok") and t_e <= s["t"] < end]
            if not window:
                continue  # this peer was not answering then: it could not be asked
            seen = [s["t"] for s in window if _sees_gone(s, ids)]
            if not seen and t_blind <= t_e + p["within"]:
                continue  # stopped itself before the deadline: it had no chance to see
            per[f"{name} sees {event.peer} @{t_e:.0f}s"] = seen[0] - t_e if seen else math.inf
    measured = max(per.values()) if per else None
    return Result(
        "membership",
        f"every live peer sees the stopped peer dead/left within {p['within']:g} s",
        measured,
        p["within"],
        "<=",
        False,
        per_peer=per,
    )


def _next_start(scenario: ScenarioView, record: RunRecord, peer: str | None, index: int) -> float:
    for j in range(index + 1, len(scenario.events)):
        e = scenario.events[j]
        if e.peer == peer and e.action in ("restart", "join"):
            return record.event_time(scenario, j)
    return math.inf


def _stopped_at(record: RunRecord, name: str, t0: float) -> float:
    """When `name` stops watching from `t0` on: `t0` itself if the runner had stopped it (kill,
    terminate, freeze) by then and not brought it back, else its next stop (inf: never). Kills
    of several peers land a few ms apart: none of them is a blind observer of the others."""
    stops = ("kill", "terminate", "freeze")
    own = sorted(
        (float(e["t"]), e.get("action"))
        for e in record.timeline
        if e.get("peer") == name and e.get("action") in PEER_LIFECYCLE
    )
    before = [action for t, action in own if t <= t0]
    if before and before[-1] in stops:
        return t0
    return min((t for t, action in own if t > t0 and action in stops), default=math.inf)


def _sees_gone(sample: Mapping[str, Any], ids: set[str]) -> bool:
    members = sample.get("members") or {}
    return any(members.get(pid) in ("dead", "left") for pid in ids)


def reconverge(scenario: ScenarioView, record: RunRecord, p: Mapping[str, Any]) -> Result:
    heal_index = first_event(scenario, p, ("heal",))[0]
    t_heal = record.event_time(scenario, heal_index)
    splits = [
        record.event_time(scenario, i)
        for i, e in enumerate(scenario.events[:heal_index])
        if e.action == "partition"
    ]
    t_split = splits[-1] if splits else 0.0
    pre = _distances(record, t_split - p["window"], t_split)
    level = p["factor"] * max(pre) if pre else None
    split = _distances(record, t_split, t_heal)
    peak = max(split, default=None)
    grew = level is not None and peak is not None and peak > p["min_growth"] * level
    after = [
        d["t"]
        for d in record.distances
        if d["t"] >= t_heal and d.get("max") is not None and level is not None and d["max"] <= level
    ]
    measured = None if level is None else (after[0] - t_heal if after else math.inf)
    detail = "" if level is not None else "no distance sample before the partition"
    if level is not None and not grew:
        # Coming back under a level the split never left shows nothing about re-converging.
        measured = math.inf
        detail = (
            f"the split never pushed the model distance above {p['min_growth']:g} x the "
            f"pre-partition level ({_num(peak)} vs {level:.4g}): nothing to re-converge from"
        )
    return Result(
        "reconverge",
        f"max model distance back under {p['factor']:g} x its pre-partition level within "
        f"{p['within']:g} s of the heal (after growing past {p['min_growth']:g} x it)",
        measured,
        p["within"],
        "<=",
        False,
        detail=detail,
        per_peer={"pre_partition_level": level},
        facts={
            "pre_partition_level": level,
            "split_peak": peak,
            "growth": peak / level if peak is not None and level else None,
            "grew": grew,
            **_after_heal(record, t_heal),
        },
    )


def _after_heal(record: RunRecord, t_heal: float) -> dict[str, float | None]:
    """The closest the models came after the heal, when, and where they ended: a failure then
    says whether the halves never met or met and stayed a little over the level."""
    healed = [d for d in record.distances if d["t"] >= t_heal and d.get("max") is not None]
    closest = min(healed, key=lambda d: float(d["max"]), default=None)
    return {
        "closest_after_heal": None if closest is None else float(closest["max"]),
        "closest_at_s": None if closest is None else float(closest["t"]) - t_heal,
        "last_after_heal": float(healed[-1]["max"]) if healed else None,
    }


def _distances(record: RunRecord, t0: float, t1: float) -> list[float]:
    """The max pairwise distances sampled in [t0, t1)."""
    return [
        float(d["max"]) for d in record.distances if t0 <= d["t"] < t1 and d.get("max") is not None
    ]


def _num(value: float | None) -> str:
    return "no sample" if value is None else f"{value:.4g}"


def merge(scenario: ScenarioView, record: RunRecord, p: Mapping[str, Any]) -> Result:
    heal_index = first_event(scenario, p, ("heal",))[0]
    t_heal = record.event_time(scenario, heal_index)
    # Peers running from the heal to the end, by their current ids; a peer the runner stops or
    # starts after the heal changes what "everyone" means, so such peers are left out.
    moved = {
        e.get("peer")
        for e in record.timeline
        if float(e.get("t", -1.0)) >= t_heal and e.get("action") in PEER_LIFECYCLE
    }
    names = [
        n
        for n in running_at_end(scenario, record, (q.name for q in scenario.peers))
        if n not in moved and any(s["t"] <= t_heal for s in record.samples.get(n, []))
    ]
    ids = {n: record.peer_ids[n][-1] for n in names if record.peer_ids.get(n)}
    per: dict[str, Any] = {}
    for name in names:
        want = {pid for other, pid in ids.items() if other != name}
        merged = [
            s["t"]
            for s in record.samples.get(name, [])
            if s.get("ok") and s["t"] >= t_heal and _sees_alive(s, want)
        ]
        per[name] = merged[0] - t_heal if merged else math.inf
    return Result(
        "merge",
        f"every peer lists every other one alive within {p['within']:g} s of the heal",
        max(per.values()) if per else None,
        p["within"],
        "<=",
        False,
        per_peer=per,
    )


def _sees_alive(sample: Mapping[str, Any], ids: set[str]) -> bool:
    members = sample.get("members") or {}
    return all(members.get(pid) == "alive" for pid in ids)
