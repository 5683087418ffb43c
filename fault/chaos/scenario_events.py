"""The `[[event]]` tables of a scenario: the actions, one event's keys, and the timeline's
consistency (a peer is killed only while up, restarted only while down, ...). The file format
is documented in swarmnode.fault.chaos.scenario."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from swarmnode.fault.chaos.errors import ScenarioError
from swarmnode.fault.chaos.scenario_values import (
    groups_value,
    no_unknown,
    number,
    peer_name,
    string,
)
from swarmnode.fault.inject.byzantine import parse_byzantine
from swarmnode.fault.inject.spec import FaultSpecError, parse_fault_spec

if TYPE_CHECKING:
    from swarmnode.fault.chaos.scenario import PeerSpec

PEER_ACTIONS = ("kill", "terminate", "freeze", "thaw", "restart", "join")
ADMIN_ACTIONS = ("fault", "byzantine", "slowdown")
SWARM_ACTIONS = ("partition", "heal")
ACTIONS = PEER_ACTIONS + ADMIN_ACTIONS + SWARM_ACTIONS
# Keys an event may carry beyond at/action/id/label, by action.
_EVENT_KEYS = {
    **{a: {"peer"} for a in PEER_ACTIONS},
    "fault": {"peer", "spec"},
    "byzantine": {"peer", "kind"},
    "slowdown": {"peer", "factor"},
    "partition": {"groups"},
    "heal": set(),
}


@dataclasses.dataclass(frozen=True)
class Event:
    at: float
    action: str
    peer: str | None = None
    spec: str | None = None  # fault
    kind: str | None = None  # byzantine
    factor: float | None = None  # slowdown
    groups: tuple[tuple[str, ...], ...] = ()  # partition
    id: str | None = None
    label: str = ""


def parse_event(index: int, raw: Any, names: set[str], duration: float) -> Event:
    where = f"[[event]] #{index + 1}"
    if not isinstance(raw, Mapping):
        raise ScenarioError(f"{where} must be a table")
    action = raw.get("action")
    if action not in ACTIONS:
        raise ScenarioError(f"{where}: unknown action {action!r} (known: {', '.join(ACTIONS)})")
    where = f"{where} ({action})"
    no_unknown(raw, {"at", "action", "id", "label"} | _EVENT_KEYS[action], where)
    at = raw.get("at")
    if isinstance(at, bool) or not isinstance(at, (int, float)) or not math.isfinite(at):
        raise ScenarioError(f"{where}: bad time 'at' = {at!r} (seconds after t = 0)")
    if not 0 <= at <= duration:
        raise ScenarioError(f"{where}: bad time at = {at}: outside [0, duration = {duration:g}]")
    fields: dict[str, Any] = {"at": float(at), "action": action}
    if "peer" in _EVENT_KEYS[action]:
        fields["peer"] = peer_name(raw.get("peer"), names, where)
    if action == "fault":
        spec = string(raw, "spec", where, required=True)
        try:
            cfg = parse_fault_spec(spec)
        except FaultSpecError as exc:
            raise ScenarioError(f"{where}: {exc}") from None
        if cfg.partition:
            raise ScenarioError(f"{where}: use a 'partition' event for partitions, not spec")
        fields["spec"] = spec
    elif action == "byzantine":
        kind = string(raw, "kind", where, required=True)
        if kind.lower() != "none":
            try:
                parse_byzantine(kind)
            except FaultSpecError as exc:
                raise ScenarioError(f"{where}: {exc}") from None
        fields["kind"] = kind
    elif action == "slowdown":
        fields["factor"] = number(raw, "factor", where, required=True, lo=1.0, hi=1000.0)
    elif action == "partition":
        fields["groups"] = groups_value(raw.get("groups"), names, where)
    event_id = raw.get("id")
    if event_id is not None and (not isinstance(event_id, str) or not event_id):
        raise ScenarioError(f"{where}: 'id' must be a non-empty string")
    fields["id"] = event_id
    label = raw.get("label")
    if label is not None and not isinstance(label, str):
        raise ScenarioError(f"{where}: 'label' must be a string")
    fields["label"] = label or " ".join(x for x in (action, fields.get("peer")) if x)
    return Event(**fields)


def check_timeline(events: list[Event], peers: list[PeerSpec]) -> None:
    """Replay the timeline on peer states, so an impossible step fails before anything runs."""
    state = {p.name: ("absent" if p.late else "running") for p in peers}
    allowed = {
        "kill": ("running", "frozen"),
        "terminate": ("running",),
        "freeze": ("running",),
        "thaw": ("frozen",),
        "restart": ("down",),
        "join": ("absent",),
        "fault": ("running",),
        "byzantine": ("running",),
        "slowdown": ("running",),
    }
    after = {"kill": "down", "terminate": "down", "freeze": "frozen", "thaw": "running"}
    after |= {"restart": "running", "join": "running"}
    partitioned = False
    for e in events:
        where = f"event '{e.label}' at t={e.at:g}"
        if e.peer is not None:
            now = state[e.peer]
            if now not in allowed[e.action]:
                raise ScenarioError(
                    f"{where}: peer {e.peer!r} is {now} then ({e.action} needs {' or '.join(allowed[e.action])})"
                )
            state[e.peer] = after.get(e.action, now)
            if e.action in ("restart", "join") and not any(
                s == "running" for n, s in state.items() if n != e.peer
            ):
                raise ScenarioError(f"{where}: no running peer to join")
        elif e.action == "partition":
            partitioned = True
        elif e.action == "heal":
            if not partitioned:
                raise ScenarioError(f"{where}: heal without a partition before it")
            partitioned = False
