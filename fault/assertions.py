"""Scenario assertions: pure checks over the data a chaos run sampled.

Every check reads a `RunRecord` (the per-peer `/v1/status` samples, the model distances and the
executed timeline) and returns one result with the measured value, the threshold and a verdict,
so a unit test can feed it synthetic samples. Kinds and their keys (`[[assert]]` tables):

    final_accuracy     min (required, 0-1); peers (default: honest peers running at the end);
                       window (s, default 0: the last sample) -- lowest final test accuracy
    accuracy_drop      max_drop (default 0.02); after (event id, default: the first fault);
                       window (s, default 3); peers -- largest (accuracy before the fault -
                       accuracy at the end) over honest survivors
    catch_up           within (default 0.05); peers (default: peers restarted or joined late);
                       window (s, default 3) -- largest |acc - median of the other honest peers|
    membership         within (s, default 10); after (event id, default: every kill/terminate)
                       -- slowest time until every live peer lists the target as dead or left
    reconverge         within (s, default 20); factor (default 1.0); after (heal event id,
                       default the first heal); window (s, default 5) -- time after the heal until
                       the max pairwise model distance is back under factor x its level before
                       the partition (needs [scenario] params_every > 0)
    merge              within (s, default 30); after (heal event id, default the first heal)
                       -- time after the heal until every peer running then lists every other
                       one (by its current peer id) as alive: the halves' membership merged
    exchange_progress  max_stall (s, default exchange-timeout + 2 x sample_every); peers
                       (default: honest peers not slowed below the rest) -- longest time an
                       honest peer's exchange round counter stood still while it answered
    max_wait           max (s, default exchange-timeout + 0.5); peers (default: honest peers
                       never frozen, killed or slowed below the rest) -- longest single round
                       any of them reported (status `exchange.max_round_s`): one may wait at
                       most one deadline; the 0.5 s is the round's own snapshot/encode/mix work

Any kind takes `must_fail = true`: the bar is expected to fail ("failed as expected").
"""

from __future__ import annotations

import dataclasses
import math
import statistics
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from fault.scenario import Scenario

PEER_LIFECYCLE = ("kill", "terminate", "freeze", "thaw", "restart", "join")
FAULT_ACTIONS = ("kill", "terminate", "freeze", "partition", "fault", "byzantine", "slowdown")
DEFAULT_EXCHANGE_TIMEOUT = 5.0  # gossip.exchange.ExchangeConfig.timeout


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

    def event_time(self, scenario: Scenario, index: int) -> float:
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


# --- validation (called by fault.scenario) ----------------------------------------------------


def validate_assertion(kind: str, raw: Mapping[str, Any], scenario: Scenario) -> dict[str, Any]:
    """Check an `[[assert]]` table's keys; return its parameters with defaults filled in."""
    from fault.scenario import ScenarioError

    if kind not in KINDS:
        raise ScenarioError(f"unknown assertion kind (known: {', '.join(KINDS)})")
    schema = KINDS[kind][1]
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


def _check_references(kind: str, params: dict[str, Any], scenario: Scenario) -> None:
    from fault.scenario import ScenarioError

    after = params.get("after")
    actions = {
        "accuracy_drop": FAULT_ACTIONS,
        "membership": ("kill", "terminate"),
        "reconverge": ("heal",),
        "merge": ("heal",),
    }.get(kind)
    if actions is None:
        pass
    elif after is not None:
        if scenario.event_by_id(after).action not in actions:
            raise ScenarioError(f"after = {after!r} must name a {'/'.join(actions)} event")
    elif not any(e.action in actions for e in scenario.events):
        raise ScenarioError(f"needs a {'/'.join(actions)} event in the timeline")
    if kind == "catch_up" and not params.get("peers") and not _rejoined(scenario):
        raise ScenarioError("no restarted or late peer to check: give 'peers'")
    if kind == "reconverge" and scenario.params_every <= 0:
        raise ScenarioError("needs [scenario] params_every > 0 (model distances)")


def _v_unit(value: Any, key: str, _s: Scenario) -> float:
    return _v_range(value, key, 0.0, 1.0)


def _v_seconds(value: Any, key: str, _s: Scenario) -> float:
    return _v_range(value, key, 0.0, 3600.0)


def _v_factor(value: Any, key: str, _s: Scenario) -> float:
    return _v_range(value, key, 0.0, 1e6)


def _v_range(value: Any, key: str, lo: float, hi: float) -> float:
    from fault.scenario import ScenarioError

    if isinstance(value, bool) or not isinstance(value, (int, float)) or not lo <= value <= hi:
        raise ScenarioError(f"'{key}' must be a number in [{lo:g}, {hi:g}], got {value!r}")
    return float(value)


def _v_peers(value: Any, key: str, scenario: Scenario) -> list[str]:
    from fault.scenario import ScenarioError

    names = {p.name for p in scenario.peers}
    if not isinstance(value, list) or not value or not all(isinstance(v, str) for v in value):
        raise ScenarioError(f"'{key}' must be a non-empty list of peer names")
    for v in value:
        if v not in names:
            raise ScenarioError(f"unknown peer name {v!r} in '{key}'")
    return list(value)


def _v_event(value: Any, key: str, scenario: Scenario) -> str:
    from fault.scenario import ScenarioError

    ids = [e.id for e in scenario.events if e.id]
    if not isinstance(value, str) or value not in ids:
        raise ScenarioError(
            f"'{key}' = {value!r} is not an event id (ids: {', '.join(ids) or 'none'})"
        )
    return value


def _default_stall(s: Scenario) -> float:
    timeout = s.node.get("exchange-timeout", DEFAULT_EXCHANGE_TIMEOUT)
    return float(timeout) + 2 * s.sample_every


_REQUIRED = object()
_Check = Callable[[Any, str, "Scenario"], Any]


# --- evaluation --------------------------------------------------------------------------------


def evaluate(scenario: Scenario, record: RunRecord) -> list[Result]:
    """Every assertion of `scenario` over `record`, in file order."""
    results = []
    for spec in scenario.assertions:
        fn = KINDS[spec.kind][0]
        result = fn(scenario, record, spec.params)
        result.must_fail = spec.must_fail
        results.append(result)
    return results


def honest_peers(scenario: Scenario) -> list[str]:
    """Peers that are never byzantine (by flag or by an event) during the run."""
    turned = {e.peer for e in scenario.events if e.action == "byzantine" and e.kind != "none"}
    return [
        p.name
        for p in scenario.peers
        if p.name not in turned and not scenario.flags_for(p.name).get("byzantine")
    ]


def _rejoined(scenario: Scenario) -> list[str]:
    seen: list[str] = []
    for e in scenario.events:
        if e.action in ("restart", "join") and e.peer not in seen:
            seen.append(e.peer)
    return seen


def _running_at_end(scenario: Scenario, record: RunRecord, names: Iterable[str]) -> list[str]:
    return [n for n in names if record.final_state.get(n) == "running"]


def _acc_window(
    samples: list[dict[str, Any]], t1: float, window: float, t0: float = -math.inf
) -> float | None:
    """Mean accuracy of the ok samples in [t1 - window, t1] (or the last one before t1)."""
    good = [s for s in samples if s.get("ok") and s.get("acc") is not None and t0 <= s["t"] <= t1]
    if not good:
        return None
    inside = [s["acc"] for s in good if s["t"] >= t1 - window]
    return statistics.fmean(inside) if inside else float(good[-1]["acc"])


def _first_event(
    scenario: Scenario, params: Mapping[str, Any], actions: tuple[str, ...]
) -> list[int]:
    if params.get("after"):
        return [next(i for i, e in enumerate(scenario.events) if e.id == params["after"])]
    return [i for i, e in enumerate(scenario.events) if e.action in actions]


def _final_accuracy(scenario: Scenario, record: RunRecord, p: Mapping[str, Any]) -> Result:
    peers = p["peers"] or _running_at_end(scenario, record, honest_peers(scenario))
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
        detail=_missing(per),
        per_peer=per,
    )


def _accuracy_drop(scenario: Scenario, record: RunRecord, p: Mapping[str, Any]) -> Result:
    index = _first_event(scenario, p, FAULT_ACTIONS)[0]
    event = scenario.events[index]
    t_e = record.event_time(scenario, index)
    candidates = p["peers"] or [n for n in honest_peers(scenario) if n != event.peer]
    per: dict[str, Any] = {}
    for name in _running_at_end(scenario, record, candidates):
        samples = record.samples.get(name, [])
        before = _acc_window(samples, t_e - 1e-9, p["window"])
        after = _acc_window(samples, record.end_t, p["window"], t0=t_e)
        if before is not None and after is not None:
            per[name] = before - after
    measured = max(per.values()) if per else None
    return Result(
        "accuracy_drop",
        f"survivors' accuracy drop after '{event.label}' <= {p['max_drop']:.3f}",
        measured,
        p["max_drop"],
        "<=",
        False,
        per_peer=per,
    )


def _catch_up(scenario: Scenario, record: RunRecord, p: Mapping[str, Any]) -> Result:
    targets = p["peers"] or _rejoined(scenario)
    honest = _running_at_end(scenario, record, honest_peers(scenario))
    final = {n: _acc_window(record.samples.get(n, []), record.end_t, p["window"]) for n in honest}
    per: dict[str, Any] = {}
    for name in targets:
        others = [v for n, v in final.items() if n != name and v is not None]
        mine = _acc_window(record.samples.get(name, []), record.end_t, p["window"])
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
        detail=_missing(per),
        per_peer=per,
    )


def _membership(scenario: Scenario, record: RunRecord, p: Mapping[str, Any]) -> Result:
    per: dict[str, Any] = {}
    for index in _first_event(scenario, p, ("kill", "terminate")):
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


def _next_start(scenario: Scenario, record: RunRecord, peer: str | None, index: int) -> float:
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


def _reconverge(scenario: Scenario, record: RunRecord, p: Mapping[str, Any]) -> Result:
    heal_index = _first_event(scenario, p, ("heal",))[0]
    t_heal = record.event_time(scenario, heal_index)
    splits = [
        record.event_time(scenario, i)
        for i, e in enumerate(scenario.events[:heal_index])
        if e.action == "partition"
    ]
    t_split = splits[-1] if splits else 0.0
    pre = [
        d["max"]
        for d in record.distances
        if t_split - p["window"] <= d["t"] < t_split and d.get("max") is not None
    ]
    level = p["factor"] * max(pre) if pre else None
    after = [
        d["t"]
        for d in record.distances
        if d["t"] >= t_heal and d.get("max") is not None and level is not None and d["max"] <= level
    ]
    measured = None if level is None else (after[0] - t_heal if after else math.inf)
    return Result(
        "reconverge",
        f"max model distance back under {p['factor']:g} x its pre-partition level within {p['within']:g} s of the heal",
        measured,
        p["within"],
        "<=",
        False,
        detail="" if level is not None else "no distance sample before the partition",
        per_peer={"pre_partition_level": level},
    )


def _merge(scenario: Scenario, record: RunRecord, p: Mapping[str, Any]) -> Result:
    heal_index = _first_event(scenario, p, ("heal",))[0]
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
        for n in _running_at_end(scenario, record, (q.name for q in scenario.peers))
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


def _exchange_progress(scenario: Scenario, record: RunRecord, p: Mapping[str, Any]) -> Result:
    default = [n for n in honest_peers(scenario) if n not in _stragglers(scenario)]
    per = {name: _longest_stall(record.samples.get(name, [])) for name in p["peers"] or default}
    known = [v for v in per.values() if v is not None]
    return Result(
        "exchange_progress",
        f"no honest peer's exchange round counter stalls longer than {p['max_stall']:g} s",
        max(known) if known else None,
        p["max_stall"],
        "<=",
        False,
        per_peer=per,
    )


def _max_wait(scenario: Scenario, record: RunRecord, p: Mapping[str, Any]) -> Result:
    disturbed = {e.peer for e in scenario.events if e.action in ("freeze", "kill", "terminate")}
    disturbed |= _stragglers(scenario)
    default = [n for n in honest_peers(scenario) if n not in disturbed]
    per: dict[str, Any] = {}
    for name in p["peers"] or default:
        waits = [
            float(s["max_round_s"])
            for s in record.samples.get(name, [])
            if s.get("ok") and s.get("max_round_s") is not None
        ]
        per[name] = max(waits) if waits else None
    known = [v for v in per.values() if v is not None]
    return Result(
        "max_wait",
        f"no honest peer's exchange round took longer than {p['max']:g} s",
        max(known) if known and len(known) == len(per) else None,
        p["max"],
        "<=",
        False,
        detail=_missing(per, "exchange"),
        per_peer=per,
    )


def _stragglers(scenario: Scenario) -> set[str]:
    """Peers slowed down beyond the rest: by a `slowdown` event, or a per-peer `slowdown` above
    the [node] one (a [node] slowdown paces every peer alike and makes nobody a straggler)."""
    base = float(scenario.node.get("slowdown", 1.0))
    slowed = {e.peer for e in scenario.events if e.action == "slowdown" and e.peer}
    slowed |= {
        p.name
        for p in scenario.peers
        if float(scenario.flags_for(p.name).get("slowdown", 1.0)) > base
    }
    return slowed


def _default_wait(s: Scenario) -> float:
    return float(s.node.get("exchange-timeout", DEFAULT_EXCHANGE_TIMEOUT)) + 0.5


def _longest_stall(samples: list[dict[str, Any]]) -> float | None:
    """Longest run of consecutive answering samples with the same `rounds` (None: no data).
    A missing sample (frozen, down, timed out) breaks the run: a peer that cannot answer is a
    process fault, measured by other assertions."""
    longest: float | None = None
    since: float | None = None
    last = None
    for s in samples:
        if not s.get("ok") or s.get("rounds") is None:
            since, last = None, None
            continue
        if since is None or s["rounds"] != last:
            since, last = s["t"], s["rounds"]
        longest = max(longest or 0.0, s["t"] - since)
    return longest


def _missing(per: Mapping[str, Any], what: str = "accuracy") -> str:
    missing = [n for n, v in per.items() if v is None]
    return f"no {what} sample from {', '.join(missing)}" if missing else ""


_S = {"peers": (_v_peers, None), "window": (_v_seconds, 3.0)}
KINDS: dict[str, tuple[Callable[..., Result], dict[str, tuple[_Check, Any]]]] = {
    "final_accuracy": (
        _final_accuracy,
        {"min": (_v_unit, _REQUIRED), "peers": (_v_peers, None), "window": (_v_seconds, 0.0)},
    ),
    "accuracy_drop": (
        _accuracy_drop,
        {"max_drop": (_v_unit, 0.02), "after": (_v_event, None), **_S},
    ),
    "catch_up": (_catch_up, {"within": (_v_unit, 0.05), **_S}),
    "membership": (_membership, {"within": (_v_seconds, 10.0), "after": (_v_event, None)}),
    "reconverge": (
        _reconverge,
        {
            "within": (_v_seconds, 20.0),
            "factor": (_v_factor, 1.0),
            "after": (_v_event, None),
            "window": (_v_seconds, 5.0),
        },
    ),
    "max_wait": (_max_wait, {"max": (_v_seconds, _default_wait), "peers": (_v_peers, None)}),
    "merge": (_merge, {"within": (_v_seconds, 30.0), "after": (_v_event, None)}),
    "exchange_progress": (
        _exchange_progress,
        {"max_stall": (_v_seconds, _default_stall), "peers": (_v_peers, None)},
    ),
}
