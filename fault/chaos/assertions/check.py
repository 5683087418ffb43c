"""Validation of `[[assert]]` tables: each kind's keys, their checks and defaults.

Called by swarmnode.fault.chaos.scenario.schema while it parses a file, so a bad assertion is
refused before any peer starts; the kinds themselves are documented in the room's front,
swarmnode.fault.chaos.assertions.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from swarmnode.fault.chaos.errors import ScenarioError
from swarmnode.fault.chaos.record import (
    FAULT_ACTIONS,
    OUTAGE_STARTS,
    WAIT_ALLOWANCE,
    ScenarioView,
    exchange_timeout,
    first_event,
    rejoined,
)
from swarmnode.gossip.membership import DEFAULT_MAX_MEMBERS

_REQUIRED = object()
_Check = Callable[[Any, str, ScenarioView], Any]


def validate_assertion(kind: str, raw: Mapping[str, Any], scenario: ScenarioView) -> dict[str, Any]:
    """Check an `[[assert]]` table's keys; return its parameters with defaults filled in."""
    if kind not in SCHEMAS:
        raise ScenarioError(f"unknown assertion kind (known: {', '.join(SCHEMAS)})")
    schema = SCHEMAS[kind]
    for key in raw:
        if key not in schema:
            raise ScenarioError(f"unknown key '{key}' (known: {', '.join(sorted(schema))})")
    params: dict[str, Any] = {}
    for key, (check, default) in schema.items():
        if key in raw:
            params[key] = check(raw[key], key, scenario)
        elif default is _REQUIRED:
            raise ScenarioError(f"lacks '{key}'")
        else:
            params[key] = default(scenario) if callable(default) else default
    _check_references(kind, params, scenario)
    return params


def _check_window_fits(params: dict[str, Any], scenario: ScenarioView) -> None:
    """The `within` window after the heal must end inside the run: cut off by the end, a slow
    re-merge reads as one that never happened (CI once failed that way, the run ending 17 s
    after a heal whose rule allowed 30)."""
    heal = scenario.events[first_event(scenario, params, ("heal",))[0]]
    end = heal.at + params["within"]
    if end > scenario.duration:
        raise ScenarioError(
            f"within = {params['within']:g} s after the heal at {heal.at:g} s ends at {end:g} "
            f"s, after the run's duration = {scenario.duration:g}: raise duration to "
            f"{end:g} or lower within"
        )


def _check_references(kind: str, params: dict[str, Any], scenario: ScenarioView) -> None:
    after = params.get("after")
    actions = {
        "accuracy_drop": FAULT_ACTIONS,
        "keeps_training": OUTAGE_STARTS,
        "membership": ("kill", "terminate"),
        "reconverge": ("heal",),
        "merge": ("heal",),
        "victim_alive": ("hostile",),
        "exchange_rate": ("hostile",),
        "hostile_accepted": ("hostile",),
    }.get(kind)
    if actions is None:
        pass
    elif after is not None:
        if scenario.event_by_id(after).action not in actions:
            raise ScenarioError(f"after = {after!r} must name a {'/'.join(actions)} event")
    elif not any(e.action in actions for e in scenario.events):
        raise ScenarioError(f"needs a {'/'.join(actions)} event in the timeline")
    if kind in ("reconverge", "merge"):
        _check_window_fits(params, scenario)
    if params.get("until") is not None:
        starts = first_event(scenario, params, actions or FAULT_ACTIONS)
        if not starts or scenario.event_by_id(params["until"]).at < scenario.events[starts[0]].at:
            raise ScenarioError(f"until = {params['until']!r} must not come before the fault")
    if kind == "catch_up" and not params.get("peers") and not rejoined(scenario):
        raise ScenarioError("no restarted or late peer to check: give 'peers'")
    if kind.startswith("control_") and scenario.control is None:
        raise ScenarioError("needs a [control] table (the control swarm to compare with)")
    if kind == "reconverge" and scenario.params_every <= 0:
        raise ScenarioError("needs [scenario] params_every > 0 (model distances)")


def _v_unit(value: Any, key: str, _s: ScenarioView) -> float:
    return _v_range(value, key, 0.0, 1.0)


def _v_seconds(value: Any, key: str, _s: ScenarioView) -> float:
    return _v_range(value, key, 0.0, 3600.0)


def _v_factor(value: Any, key: str, _s: ScenarioView) -> float:
    return _v_range(value, key, 0.0, 1e6)


def _v_range(value: Any, key: str, lo: float, hi: float) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not lo <= value <= hi:
        raise ScenarioError(f"'{key}' must be a number in [{lo:g}, {hi:g}], got {value!r}")
    return float(value)


def _v_peers(value: Any, key: str, scenario: ScenarioView) -> list[str]:
    names = {p.name for p in scenario.peers}
    if not isinstance(value, list) or not value or not all(isinstance(v, str) for v in value):
        raise ScenarioError(f"'{key}' must be a non-empty list of peer names")
    for v in value:
        if v not in names:
            raise ScenarioError(f"unknown peer name {v!r} in '{key}'")
    return list(value)


def _v_peer(value: Any, key: str, scenario: ScenarioView) -> str:
    return _v_peers([value], key, scenario)[0]


def _v_count(value: Any, key: str, _s: ScenarioView) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ScenarioError(f"'{key}' must be a whole number >= 0, got {value!r}")
    return value


def _v_event(value: Any, key: str, scenario: ScenarioView) -> str:
    ids = [e.id for e in scenario.events if e.id]
    if not isinstance(value, str) or value not in ids:
        raise ScenarioError(
            f"'{key}' = {value!r} is not an event id (ids: {', '.join(ids) or 'none'})"
        )
    return value


def _default_stall(s: ScenarioView) -> float:
    return exchange_timeout(s) + 2 * s.sample_every


def _default_train_stall(s: ScenarioView) -> float:
    return 2 * s.sample_every + 1.0


_S = {"peers": (_v_peers, None), "window": (_v_seconds, 3.0)}
# kind -> {key: (check, default)}; a callable default is computed from the scenario.
SCHEMAS: dict[str, dict[str, tuple[_Check, Any]]] = {
    "final_accuracy": {
        "min": (_v_unit, _REQUIRED),
        "peers": (_v_peers, None),
        "window": (_v_seconds, 0.0),
    },
    "accuracy_drop": {
        "max_drop": (_v_unit, 0.02),
        "after": (_v_event, None),
        "until": (_v_event, None),
        **_S,
    },
    "keeps_training": {
        "max_stall": (_v_seconds, _default_train_stall),
        "after": (_v_event, None),
        "until": (_v_event, None),
        "peers": (_v_peers, None),
    },
    "catch_up": {"within": (_v_unit, 0.05), **_S},
    "membership": {"within": (_v_seconds, 10.0), "after": (_v_event, None)},
    "reconverge": {
        "within": (_v_seconds, 20.0),
        "factor": (_v_factor, 1.0),
        "after": (_v_event, None),
        "window": (_v_seconds, 5.0),
        "min_growth": (_v_factor, 2.0),
    },
    "max_wait": {"allowance": (_v_seconds, WAIT_ALLOWANCE), "peers": (_v_peers, None)},
    "merge": {"within": (_v_seconds, 30.0), "after": (_v_event, None)},
    "exchange_progress": {"max_stall": (_v_seconds, _default_stall), "peers": (_v_peers, None)},
    "member_cap": {"max": (_v_count, DEFAULT_MAX_MEMBERS), "peers": (_v_peers, None)},
    "victim_alive": {
        "min_share": (_v_unit, 0.95),
        "peer": (_v_peer, None),
        "after": (_v_event, None),
    },
    "exchange_rate": {
        "min_ratio": (_v_unit, 0.9),
        "baseline": (_v_seconds, None),
        "after": (_v_event, None),
        "peers": (_v_peers, None),
    },
    "hostile_accepted": {"max": (_v_count, 0), "after": (_v_event, None)},
    "control_accuracy": {
        "max_drop": (_v_unit, 0.03),
        "at": (_v_seconds, None),
        "window": (_v_seconds, 3.0),
        "peers": (_v_peers, None),
    },
    "control_rounds": {
        "min_ratio": (_v_unit, 0.7),
        "from": (_v_seconds, None),
        "until": (_v_seconds, None),
        "peers": (_v_peers, None),
    },
}
