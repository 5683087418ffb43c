"""Scenario assertions: pure checks over the data a chaos run sampled.

Every check reads a `RunRecord` (the per-peer `/v1/status` samples, the model distances and the
executed timeline) and returns one result with the measured value, the threshold and a verdict,
so a unit test can feed it synthetic samples. Kinds and their keys (`[[assert]]` tables):

    final_accuracy     min (required, 0-1); peers (default: honest peers running at the end);
                       window (s, default 0: the last sample) -- lowest final test accuracy
    accuracy_drop      max_drop (default 0.02); after (event id, default: the first fault);
                       until (event id, default: the end of the run); window (s, default 3);
                       peers (default: honest peers no event targets) -- largest (accuracy
                       before the fault - LOWEST accuracy in [fault, until]) over the survivors;
                       the mean over `window` s before the fault is the reference level
    keeps_training     max_stall (s, default 2 x sample_every + 1); after (event id, default:
                       the first kill/terminate/freeze/partition); until (event id, default: the
                       first restart/join/thaw/heal after it, else the end); peers (default as
                       accuracy_drop) -- longest time a survivor's step counter stood still in
                       [after, until]; a survivor whose counter never moved there fails
    catch_up           within (default 0.05); peers (default: peers restarted or joined late);
                       window (s, default 3) -- largest |acc - median of the other honest peers|;
                       a target counts only with samples taken after its last restart/join/thaw,
                       and must be running and answering at the end (else it fails, saying why)
    membership         within (s, default 10); after (event id, default: every kill/terminate)
                       -- slowest time until every live peer lists the target as dead or left
    reconverge         within (s, default 20); factor (default 1.0); after (heal event id,
                       default the first heal); window (s, default 5); min_growth (default 2.0)
                       -- time after the heal until the max pairwise model distance is back
                       under factor x its level before the partition (needs [scenario]
                       params_every > 0). The split must first have pushed the distance above
                       min_growth x that level: a partition the models never felt shows nothing
    merge              within (s, default 30); after (heal event id, default the first heal)
                       -- time after the heal until every peer running then lists every other
                       one (by its current peer id) as alive: the halves' membership merged
    exchange_progress  max_stall (s, default exchange-timeout + 2 x sample_every); peers
                       (default: honest peers not slowed below the rest) -- longest time an
                       honest peer's exchange round counter stood still while it answered
    max_wait           allowance (s, default 0.2); peers (default: honest peers never frozen,
                       killed or slowed below the rest) -- longest single round any of them
                       reported (status `exchange.max_round_s`), against one exchange timeout
                       (`exchange-timeout`) + `allowance`. A round waits on the network for at
                       most one deadline; the allowance covers only the round's own work around
                       that wait (snapshot, encode, decode, mix: a few ms for the digits MLP, the
                       rest is thread scheduling on a shared CPU). The report lists both parts.

Any kind takes `must_fail = true`: the bar is expected to fail ("failed as expected").
"""

from __future__ import annotations

import dataclasses
import math
import statistics
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any

from swarmnode.fault.chaos.errors import ScenarioError

if TYPE_CHECKING:
    from swarmnode.fault.chaos.scenario import Scenario

PEER_LIFECYCLE = ("kill", "terminate", "freeze", "thaw", "restart", "join")
FAULT_ACTIONS = ("kill", "terminate", "freeze", "partition", "fault", "byzantine", "slowdown")
OUTAGE_STARTS = ("kill", "terminate", "freeze", "partition")
OUTAGE_ENDS = ("restart", "join", "thaw", "heal")
BACK_ACTIONS = ("restart", "join", "thaw")  # after these a peer's samples are its own again
DEFAULT_EXCHANGE_TIMEOUT = 5.0  # swarmnode.gossip.exchange.ExchangeConfig.timeout
# max_wait: the round's own work around its one network deadline (see the module docstring).
WAIT_ALLOWANCE = 0.2


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
    facts: dict[str, Any] = dataclasses.field(default_factory=dict)  # what the bar is made of

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


# --- validation (called by swarmnode.fault.chaos.scenario) ----------------------------------------------------


def validate_assertion(kind: str, raw: Mapping[str, Any], scenario: Scenario) -> dict[str, Any]:
    """Check an `[[assert]]` table's keys; return its parameters with defaults filled in."""
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
    after = params.get("after")
    actions = {
        "accuracy_drop": FAULT_ACTIONS,
        "keeps_training": OUTAGE_STARTS,
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
    if params.get("until") is not None:
        starts = _first_event(scenario, params, actions or FAULT_ACTIONS)
        if not starts or scenario.event_by_id(params["until"]).at < scenario.events[starts[0]].at:
            raise ScenarioError(f"until = {params['until']!r} must not come before the fault")
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
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not lo <= value <= hi:
        raise ScenarioError(f"'{key}' must be a number in [{lo:g}, {hi:g}], got {value!r}")
    return float(value)


def _v_peers(value: Any, key: str, scenario: Scenario) -> list[str]:
    names = {p.name for p in scenario.peers}
    if not isinstance(value, list) or not value or not all(isinstance(v, str) for v in value):
        raise ScenarioError(f"'{key}' must be a non-empty list of peer names")
    for v in value:
        if v not in names:
            raise ScenarioError(f"unknown peer name {v!r} in '{key}'")
    return list(value)


def _v_event(value: Any, key: str, scenario: Scenario) -> str:
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


def _survivors(scenario: Scenario, p: Mapping[str, Any]) -> list[str]:
    """The peers an outage must not hurt: given, or the honest peers no event targets."""
    touched = {e.peer for e in scenario.events if e.peer}
    return p["peers"] or [n for n in honest_peers(scenario) if n not in touched]


def _window_end(
    scenario: Scenario, record: RunRecord, p: Mapping[str, Any], index: int, default: float
) -> float:
    """When the observed window after event `index` closes: the `until` event, or `default`."""
    if p.get("until"):
        until = next(i for i, e in enumerate(scenario.events) if e.id == p["until"])
        return record.event_time(scenario, until)
    return default


def _accuracy_drop(scenario: Scenario, record: RunRecord, p: Mapping[str, Any]) -> Result:
    index = _first_event(scenario, p, FAULT_ACTIONS)[0]
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
        detail=_missing(per),
        per_peer=per,
        facts={"from_t": t_e, "until_t": t_end, "levels": levels},
    )


def _keeps_training(scenario: Scenario, record: RunRecord, p: Mapping[str, Any]) -> Result:
    index = _first_event(scenario, p, OUTAGE_STARTS)[0]
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
        stall = _longest_stall(window, "step")
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
        detail=_missing(per, "step"),
        per_peer=per,
        facts={"from_t": t_e, "until_t": t_end, "steps_advanced": advanced},
    )


def _outage_end(scenario: Scenario, record: RunRecord, index: int) -> float:
    """The first restart/join/thaw/heal after event `index` (the end of the run if none)."""
    for j in range(index + 1, len(scenario.events)):
        if scenario.events[j].action in OUTAGE_ENDS:
            return record.event_time(scenario, j)
    return record.end_t


def _catch_up(scenario: Scenario, record: RunRecord, p: Mapping[str, Any]) -> Result:
    targets = p["peers"] or _rejoined(scenario)
    honest = _running_at_end(scenario, record, honest_peers(scenario))
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
    scenario: Scenario, record: RunRecord, name: str, window: float
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
        },
    )


def _distances(record: RunRecord, t0: float, t1: float) -> list[float]:
    """The max pairwise distances sampled in [t0, t1)."""
    return [
        float(d["max"]) for d in record.distances if t0 <= d["t"] < t1 and d.get("max") is not None
    ]


def _num(value: float | None) -> str:
    return "no sample" if value is None else f"{value:.4g}"


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
    measured = max(known) if known and len(known) == len(per) else None
    timeout = _exchange_timeout(scenario)
    return Result(
        "max_wait",
        f"no honest peer's exchange round took longer than one exchange timeout "
        f"({timeout:g} s) + {p['allowance']:g} s of its own encode/decode work",
        measured,
        timeout + p["allowance"],
        "<=",
        False,
        detail=_missing(per, "exchange"),
        per_peer=per,
        facts={
            "exchange_timeout": timeout,
            "allowance": p["allowance"],
            "bound": timeout + p["allowance"],
            "measured": measured,
            "over_timeout": None if measured is None else measured - timeout,
        },
    )


def _exchange_timeout(s: Scenario) -> float:
    return float(s.node.get("exchange-timeout", DEFAULT_EXCHANGE_TIMEOUT))


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


def _default_train_stall(s: Scenario) -> float:
    return 2 * s.sample_every + 1.0


def _longest_stall(samples: list[dict[str, Any]], key: str = "rounds") -> float | None:
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
        {"max_drop": (_v_unit, 0.02), "after": (_v_event, None), "until": (_v_event, None), **_S},
    ),
    "keeps_training": (
        _keeps_training,
        {
            "max_stall": (_v_seconds, _default_train_stall),
            "after": (_v_event, None),
            "until": (_v_event, None),
            "peers": (_v_peers, None),
        },
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
            "min_growth": (_v_factor, 2.0),
        },
    ),
    "max_wait": (
        _max_wait,
        {"allowance": (_v_seconds, WAIT_ALLOWANCE), "peers": (_v_peers, None)},
    ),
    "merge": (_merge, {"within": (_v_seconds, 30.0), "after": (_v_event, None)}),
    "exchange_progress": (
        _exchange_progress,
        {"max_stall": (_v_seconds, _default_stall), "peers": (_v_peers, None)},
    ),
}
