"""The `[[event]]` tables of a scenario: the actions, one event's keys, and the timeline's
consistency (a peer is killed only while up, restarted only while down, ...). The file format
is documented in swarmnode.fault.chaos.scenario.schema."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from typing import Any

from swarmnode.fault.chaos.errors import ScenarioError
from swarmnode.fault.chaos.scenario.values import (
    groups_value,
    no_unknown,
    number,
    peer_name,
    string,
)
from swarmnode.fault.hostile import HOSTILE_KINDS, source_addresses
from swarmnode.fault.inject import FaultSpecError, parse_byzantine, parse_fault_spec
from swarmnode.kernels.errors import did_you_mean

PEER_ACTIONS = ("kill", "terminate", "freeze", "thaw", "restart", "join")
ADMIN_ACTIONS = ("fault", "byzantine", "slowdown")
SWARM_ACTIONS = ("partition", "heal")
HOSTILE_ACTIONS = ("hostile",)  # an attacker the runner drives itself (swarmnode.fault.hostile)
ACTIONS = PEER_ACTIONS + ADMIN_ACTIONS + SWARM_ACTIONS + HOSTILE_ACTIONS
# Keys an event may carry beyond at/action/id/label, by action.
_EVENT_KEYS = {
    **{a: {"peer"} for a in PEER_ACTIONS},
    "fault": {"peer", "spec"},
    "byzantine": {"peer", "kind"},
    "slowdown": {"peer", "factor"},
    "partition": {"groups"},
    "heal": set(),
    "hostile": {
        "peer", "kind", "victim", "count", "rate", "duration", "sources", "source_net", "listen",
        "everyone",
    },
}  # fmt: skip
# What a hostile event's `count` means, and its default, by kind (`rate`: messages a second;
# the drag: pushes a second, `count` unused).
HOSTILE_COUNT = {"sybil-flood": 1000, "slow-bodies": 100, "forged-records": 1, "drag": 1}
MAX_SOURCES = 254  # sybil-flood `sources`: local addresses it sends from


@dataclasses.dataclass(frozen=True)
class Event:
    at: float
    action: str
    peer: str | None = None
    spec: str | None = None  # fault
    kind: str | None = None  # byzantine
    factor: float | None = None  # slowdown
    groups: tuple[tuple[str, ...], ...] = ()  # partition
    victim: str | None = None  # hostile forged-records: whose records are forged
    count: int = 0  # hostile: sybils, or slow connections
    rate: float = 0.0  # hostile: messages a second (drag: pushes a second)
    duration: float = 0.0  # hostile: seconds the attack lasts
    sources: int = 0  # hostile sybil-flood: local addresses it sends from (0: 127.0.0.1 only)
    source_net: str = ""  # ... taken from this network (one per /24 when wider than a /24)
    listen: bool = False  # ... its sybils advertise listeners that accept and never answer
    everyone: bool = False  # ... it floods every honest peer, not only `peer`
    id: str | None = None
    label: str = ""


def parse_event(index: int, raw: Any, names: set[str], duration: float) -> Event:
    where = f"[[event]] #{index + 1}"
    if not isinstance(raw, Mapping):
        raise ScenarioError(f"{where} must be a table")
    action = raw.get("action")
    known = f"(known: {', '.join(ACTIONS)})"
    if action is None:  # a misspelt key (`acton = "kill"`) is the likely cause: name it
        typo = next((k for k in raw if did_you_mean(str(k), {"action"})), None)
        hint = f": '{typo}' is not a key{did_you_mean(str(typo), {'action'})}" if typo else ""
        raise ScenarioError(f"{where}: no 'action'{hint} {known}")
    if action not in ACTIONS:
        hint = did_you_mean(action, ACTIONS) if isinstance(action, str) else ""
        raise ScenarioError(f"{where}: unknown action {action!r}{hint} {known}")
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
    elif action == "hostile":
        fields.update(_hostile_fields(raw, fields, names, duration, where))
    event_id = raw.get("id")
    if event_id is not None and (not isinstance(event_id, str) or not event_id):
        raise ScenarioError(f"{where}: 'id' must be a non-empty string")
    fields["id"] = event_id
    label = raw.get("label")
    if label is not None and not isinstance(label, str):
        raise ScenarioError(f"{where}: 'label' must be a string")
    default = " ".join(x for x in (action, fields.get("peer")) if x)
    if action == "hostile":
        default = f"{fields['kind']} on {fields['peer']}"
    fields["label"] = label or default
    return Event(**fields)


def _hostile_fields(
    raw: Mapping[str, Any], fields: dict[str, Any], names: set[str], duration: float, where: str
) -> dict[str, Any]:
    """kind (required), victim (forged-records: required, not the target), count, rate and
    duration (default: to the end of the run)."""
    kind = string(raw, "kind", where, required=True)
    if kind not in HOSTILE_KINDS:
        raise ScenarioError(f"{where}: unknown kind {kind!r} (known: {', '.join(HOSTILE_KINDS)})")
    out: dict[str, Any] = {"kind": kind}
    if kind == "forged-records":
        out["victim"] = peer_name(raw.get("victim"), names, f"{where} 'victim'")
        if out["victim"] == fields["peer"]:
            raise ScenarioError(f"{where}: the victim must be another peer than the target")
    elif "victim" in raw:
        raise ScenarioError(f"{where}: 'victim' is for kind = 'forged-records'")
    count = number(raw, "count", where, default=HOSTILE_COUNT[kind], lo=1, hi=100_000)
    if count != int(count):
        raise ScenarioError(f"{where}: 'count' must be a whole number, got {count:g}")
    out["count"] = int(count)
    out["rate"] = number(raw, "rate", where, default=2.0, lo=0.0, hi=1000.0, open_lo=True)
    left = duration - fields["at"]
    out["duration"] = number(raw, "duration", where, default=left, lo=0.0, hi=left, open_lo=True)
    out.update(_source_fields(raw, kind, where))
    return out


def _source_fields(raw: Mapping[str, Any], kind: str, where: str) -> dict[str, Any]:
    """sybil-flood only: `sources` (count), `source_net` (CIDR, default 127.1.0.0/16: one
    address per /24), `listen` (its sybils advertise silent listeners) and `everyone` (it
    floods every honest peer)."""
    keys = {"sources", "source_net", "listen", "everyone"} & set(raw)
    if not keys:
        return {}
    if kind != "sybil-flood":
        raise ScenarioError(f"{where}: {', '.join(sorted(keys))} only for kind = 'sybil-flood'")
    out: dict[str, Any] = {}
    count = number(raw, "sources", where, default=0, lo=0, hi=MAX_SOURCES)
    if count != int(count):
        raise ScenarioError(f"{where}: 'sources' must be a whole number, got {count:g}")
    out["sources"] = int(count)
    net = string(raw, "source_net", where, default="127.1.0.0/16")
    try:
        source_addresses(net, max(1, out["sources"]))
    except ValueError as exc:
        raise ScenarioError(f"{where}: 'source_net' {net!r}: {exc}") from None
    out["source_net"] = net
    for key in ("listen", "everyone"):
        value = raw.get(key, False)
        if not isinstance(value, bool):
            raise ScenarioError(f"{where}: '{key}' must be true or false")
        out[key] = value
    return out


def check_timeline(events: list[Event], late: Mapping[str, bool]) -> None:
    """Replay the timeline on peer states, so an impossible step fails before anything runs.
    `late`: each peer's name, and whether a `join` event starts it (not t = 0)."""
    state = {name: ("absent" if is_late else "running") for name, is_late in late.items()}
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
        "hostile": ("running",),
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
