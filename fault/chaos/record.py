"""What a chaos run observed (`RunRecord`), one assertion's verdict (`Result`), and the readings
of a scenario every assertion family shares (honest peers, the first fault, stalls).

Pure data and pure functions: the assertion families (the room swarmnode.fault.chaos.assertions)
and their validation (swarmnode.fault.chaos.assertions.check) build on this module.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Protocol

from swarmnode.gossip.exchange import ExchangeConfig

PEER_LIFECYCLE = ("kill", "terminate", "freeze", "thaw", "restart", "join")
FAULT_ACTIONS = ("kill", "terminate", "freeze", "partition", "fault", "byzantine", "slowdown")
OUTAGE_STARTS = ("kill", "terminate", "freeze", "partition")
OUTAGE_ENDS = ("restart", "join", "thaw", "heal")
BACK_ACTIONS = ("restart", "join", "thaw")  # after these a peer's samples are its own again
# The peers' own default: a scenario without `exchange-timeout` runs them with it.
DEFAULT_EXCHANGE_TIMEOUT = ExchangeConfig().timeout
# max_wait: the round's own work around its one network deadline (see assertions.py).
WAIT_ALLOWANCE = 0.2


# What the assertions and their validation read of a scenario. Declared here, below both, so
# that the assertions never import the scenario room whose parser calls their validation (the
# room's `Scenario`, `PeerSpec`, `AssertionSpec` and `Event` implement these).


class EventView(Protocol):
    """One `[[event]]` as the assertions read it."""

    @property
    def at(self) -> float: ...
    @property
    def action(self) -> str: ...
    @property
    def peer(self) -> str | None: ...
    @property
    def kind(self) -> str | None: ...
    @property
    def id(self) -> str | None: ...


class PeerView(Protocol):
    @property
    def name(self) -> str: ...


class AssertionView(Protocol):
    """One `[[assert]]` table, validated: its kind, its parameters, whether it must fail."""

    @property
    def kind(self) -> str: ...
    @property
    def params(self) -> dict[str, Any]: ...
    @property
    def must_fail(self) -> bool: ...


class ControlView(Protocol):
    @property
    def peer(self) -> str: ...


class ScenarioView(Protocol):
    """A parsed scenario as the assertions read it."""

    @property
    def node(self) -> dict[str, Any]: ...
    @property
    def peers(self) -> Sequence[PeerView]: ...
    @property
    def events(self) -> Sequence[EventView]: ...
    @property
    def assertions(self) -> Sequence[AssertionView]: ...
    @property
    def sample_every(self) -> float: ...
    @property
    def params_every(self) -> float: ...
    @property
    def duration(self) -> float: ...
    @property
    def control(self) -> ControlView | None: ...

    def flags_for(self, name: str) -> dict[str, Any]: ...

    def event_by_id(self, event_id: str) -> EventView: ...


@dataclasses.dataclass
class RunRecord:
    """What a run observed. `samples[name]` is time-ordered; each sample is `{"t", "ok", ...}`
    with the status fields when ok (`acc`, `loss`, `step`, `rounds`, `members` as
    `{peer_id: state}`) and `why` when not. `timeline` entries carry `t` (actual), `index` (into
    `scenario.events`, None for runner notes such as `died`), `action` and `peer`."""

    samples: dict[str, list[dict[str, Any]]]
    distances: list[dict[str, Any]]
    timeline: list[dict[str, Any]]
    peer_ids: dict[str, list[str]]
    final_state: dict[str, str]
    end_t: float
    # each hostile actor's report (swarmnode.fault.chaos.hostile): kind, peer, start, end, ...
    hostile: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    # the control swarm's record (swarmnode.fault.chaos.control), and how its run ended
    control: RunRecord | None = None
    control_result: str | None = None

    def event_time(self, scenario: ScenarioView, index: int) -> float:
        for entry in self.timeline:
            if entry.get("index") == index:
                return float(entry["t"])
        return scenario.events[index].at  # never ran (run cut short): its scheduled time


@dataclasses.dataclass
class Result:
    kind: str
    description: str
    measured: float | None
    threshold: float
    op: str  # how measured must compare to threshold: "<=" or ">="
    must_fail: bool
    detail: str = ""
    per_peer: dict[str, Any] = dataclasses.field(default_factory=dict)
    facts: dict[str, Any] = dataclasses.field(default_factory=dict)  # what the bar is made of

    @classmethod
    def over_peers(
        cls,
        kind: str,
        description: str,
        per: dict[str, Any],
        summary: Callable[[list[Any]], float],
        threshold: float,
        op: str,
        **extra: Any,
    ) -> Result:
        """A bar on `summary` (max, min, sum) of the per-peer values that are known."""
        known = [v for v in per.values() if v is not None]
        measured = summary(known) if known else None
        return cls(kind, description, measured, threshold, op, False, per_peer=per, **extra)

    @property
    def met(self) -> bool:
        """The bar itself holds (before `must_fail` is taken into account)."""
        if self.measured is None or math.isnan(self.measured):
            return False
        if self.op == "<=":
            return self.measured <= self.threshold
        return self.measured >= self.threshold

    @property
    def status(self) -> str:
        if self.measured is None:
            return "no data"
        if self.must_fail:
            return "passed unexpectedly" if self.met else "failed as expected"
        return "pass" if self.met else "fail"

    @property
    def ok(self) -> bool:
        return self.status in ("pass", "failed as expected")

    def to_json(self) -> dict[str, Any]:
        out = dataclasses.asdict(self)
        out.update(status=self.status, ok=self.ok, met=self.met)
        return out


def honest_peers(scenario: ScenarioView) -> list[str]:
    """Peers that are never byzantine (by flag or by an event) during the run."""
    turned = {e.peer for e in scenario.events if e.action == "byzantine" and e.kind != "none"}
    return [
        p.name
        for p in scenario.peers
        if p.name not in turned and not scenario.flags_for(p.name).get("byzantine")
    ]


def rejoined(scenario: ScenarioView) -> list[str]:
    seen: list[str] = []
    for e in scenario.events:
        if e.action in ("restart", "join") and e.peer not in seen:
            seen.append(e.peer)
    return seen


def running_at_end(scenario: ScenarioView, record: RunRecord, names: Iterable[str]) -> list[str]:
    return [n for n in names if record.final_state.get(n) == "running"]


def first_event(
    scenario: ScenarioView, params: Mapping[str, Any], actions: tuple[str, ...]
) -> list[int]:
    if params.get("after"):
        return [next(i for i, e in enumerate(scenario.events) if e.id == params["after"])]
    return [i for i, e in enumerate(scenario.events) if e.action in actions]


def exchange_timeout(s: ScenarioView) -> float:
    return float(s.node.get("exchange-timeout", DEFAULT_EXCHANGE_TIMEOUT))


def longest_stall(samples: list[dict[str, Any]], key: str = "rounds") -> float | None:
    """Longest run of consecutive answering samples with the same `key` counter (None: no
    data). A missing sample (frozen, down, timed out) breaks the run: a peer that cannot answer
    is a process fault, measured by other assertions."""
    longest: float | None = None
    since: float | None = None
    last = None
    for s in samples:
        if not s.get("ok") or s.get(key) is None:
            since, last = None, None
            continue
        if since is None or s[key] != last:
            since, last = s["t"], s[key]
        longest = max(longest or 0.0, s["t"] - since)
    return longest


def missing_note(per: Mapping[str, Any], what: str = "accuracy") -> str:
    missing = [n for n, v in per.items() if v is None]
    return f"no {what} sample from {', '.join(missing)}" if missing else ""
