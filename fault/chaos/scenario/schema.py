"""Chaos scenarios: the TOML schema, parsing and validation (`swarmnode chaos SCENARIO.toml`).

A scenario starts N real peer processes on 127.0.0.1, follows a timeline of faults, samples every
peer's `/v1/status` and checks assertions at the end. Time `t = 0` is the moment every peer that
starts at once has written its ready file; every `at` is seconds after that.

    [scenario]
    name = "kill-half"        # default: the file name without .toml
    description = "..."       # one line, printed and stored in the report
    duration = 60             # seconds from t = 0 to the end of the run (required, <= 3600)
    sample_every = 1.0        # seconds between two /v1/status samples of every peer
    sample_timeout = 0.8      # deadline of one status request (default: min(0.8 * sample_every, 1))
    params_every = 0          # seconds between parameter pulls for model distances; 0 = off
    ready_timeout = 60        # seconds a starting peer has to write its ready file
    stop_grace = 5            # seconds between SIGTERM and SIGKILL when the run ends
    secret = "..."            # swarm secret for every peer (default: $SWARMNODE_SECRET if set)
    admission = "trust"       # a closed swarm: the runner makes every peer's key before its
                              # first start and passes `--admission trust --trust FILE` listing
                              # them (default: the peers' own default, by the secret)

    [node]                    # `swarmnode start` options shared by every peer, the keys and
    model = "mlp:64"          # values of `swarmnode start --config FILE` (checked by the same
    exchange = "robust"       # loader: `swarmnode chaos` passes it in); each reaches the peer as
                              # `--key value`, `true` a bare `--key`, a list `--key a,b`.

    [[peer]]                  # one table per peer, in shard order: peer i trains on shard i/N
    name = "a"                # required: [a-z0-9_-], unique; events and assertions use it
    byzantine = "alie"        # any other key overrides a [node] flag for this peer only

    [[event]]                 # the timeline; events run in `at` order (ties: file order)
    at = 10                   # seconds after t = 0, within [0, duration]
    action = "kill"           # see ACTIONS in events.py
    peer = "a"                # the target of a peer action
    id = "first-kill"         # optional name that assertions can refer to (`after = ...`)
    label = "kill a"          # optional text on the plot (default: "<action> <peer>")

    [control]                 # a control swarm run alongside (swarmnode.fault.chaos.control):
    peer = "x"                # the seat an attacker takes here: a [[peer]] (a byzantine one) or
                              # a name of its own (an outside attacker: its shard stays empty)
    slowdown = 10             # any other key: a [node] flag of that peer in the control, where
                              # it is honest (and slow); hostile events do not run there

    [[assert]]                # checked over the sampled data at the end; see swarmnode.fault.chaos.assertions
    kind = "final_accuracy"
    min = 0.85
    must_fail = false         # true: this bar is expected to fail; failing is reported as
                              # "failed as expected" and passing fails the run

Event actions and their extra keys:

    kill       peer            SIGKILL (the swarm must detect it dead)
    terminate  peer            SIGTERM: a clean leave (announces `left`, checkpoints, exits)
    freeze     peer            SIGSTOP;  thaw  peer: SIGCONT
    restart    peer            start a stopped peer again with the same checkpoint dir (so the
                               same peer id), joining any live peer
    join       peer            first start of a late peer: a peer named by a `join` event is not
                               started at t = 0
    partition  groups          [["a", "b"], ["c"]]: POST admin/fault with that partition to every
                               running peer; peers not listed form one more group
    heal                       clear the partition
    fault      peer, spec      admin/fault with a `--fault` spec such as "drop=0.1,delay=50ms"
                               ("none" clears it); a partition set by `partition` is kept
    byzantine  peer, kind      admin/byzantine: turn the peer byzantine ("none": honest again)
    slowdown   peer, factor    admin/slowdown: the peer trains `factor` times slower
    hostile    peer, kind,     an attacker of swarmnode.fault.hostile, run by the runner against
               count, rate,    `peer` for `duration` s: kind sybil-flood (count sybils; sources =
               duration, ...   N local addresses of source_net, listen = true: silent listeners,
                               everyone = true: every honest peer), slow-bodies, forged-records
                               (victim), drag (rate pushes a second); see events.py

Peers started by the runner get `--listen 127.0.0.1:0 --ready-file ... --checkpoint-dir
<report>/peers/<name>/ckpt --shard i/N --name <name>` and `--join` to live peers; those flags
(and `advertise`, `peer-id`, `secret`) cannot be set in [node] or [[peer]]. A peer's id derives
from the key it keeps in its checkpoint dir: the runner learns it from the ready file (a restart
keeps it), and everything the report keeps is keyed by the scenario's peer names.

The swarm secret: a peer reads `$SWARMNODE_SECRET` when `--secret` is not given, so the runner
decides it for every peer: `[scenario] secret` if set, else `$SWARMNODE_SECRET` of the runner's
own environment, else none. It reaches the peers through their environment (never their argv,
which the report records), and the runner signs its own admin and parameter requests with it.
"""

from __future__ import annotations

import dataclasses
import math
import re
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from swarmnode.fault.chaos.assertions import validate_assertion  # the kinds and their keys
from swarmnode.fault.chaos.errors import ScenarioError
from swarmnode.fault.chaos.scenario.events import Event, check_timeline, parse_event
from swarmnode.fault.chaos.scenario.values import no_unknown, number, string, table
from swarmnode.fault.inject import FaultSpecError, parse_byzantine, parse_fault_spec
from swarmnode.kernels.errors import SwarmnodeError

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - pyproject pulls tomli for 3.10
    import tomli as tomllib


# Flags the runner sets itself for every peer (or, for the admin ones, for a chaos run).
RUNNER_FLAGS = frozenset(
    {
        "listen", "advertise", "join", "ready-file", "checkpoint-dir", "shard", "peer-id", "name",
        "secret", "admission", "trust", "enable-admin", "admin-key", "config", "summary-json",
    }
)  # fmt: skip
# Checks a [node] or [[peer]] table as `swarmnode start --config` would (unknown keys with the
# nearest valid one, bad values), refusing the keys given; raises a SwarmnodeError. fault/ does
# not import node: the CLI passes `swarmnode start`'s loader in (node/settings/start_options.py).
NodeCheck = Callable[[Mapping[str, Any], str, frozenset[str]], object]


_SCENARIO_KEYS = {
    "name", "description", "duration", "sample_every", "sample_timeout", "params_every",
    "ready_timeout", "stop_grace", "secret", "admission",
}  # fmt: skip
_TOP_KEYS = {"scenario", "node", "peer", "event", "assert", "control"}
_NAME_RE = re.compile(r"^[a-z0-9][a-z0-9_-]{0,31}$")
MAX_DURATION = 3600.0


@dataclasses.dataclass(frozen=True)
class PeerSpec:
    name: str
    index: int  # shard index
    flags: dict[str, Any]  # this peer's overrides of [node]
    late: bool = False  # started by a `join` event, not at t = 0


@dataclasses.dataclass(frozen=True)
class AssertionSpec:
    kind: str
    params: dict[str, Any]
    must_fail: bool = False


@dataclasses.dataclass(frozen=True)
class ControlSpec:
    """The control run's one difference (swarmnode.fault.chaos.control): `peer`'s seat holds an
    honest peer with `flags` (e.g. a slowdown) instead of the attacker."""

    peer: str
    flags: dict[str, Any]


@dataclasses.dataclass(frozen=True)
class Scenario:
    name: str
    description: str
    duration: float
    node: dict[str, Any]
    peers: tuple[PeerSpec, ...]
    events: tuple[Event, ...]
    assertions: tuple[AssertionSpec, ...]
    sample_every: float = 1.0
    sample_timeout: float = 0.8
    params_every: float = 0.0
    ready_timeout: float = 60.0
    stop_grace: float = 5.0
    source: str = "<string>"
    secret: str | None = dataclasses.field(default=None, repr=False)  # never printed
    trust: bool = False  # `admission = "trust"`: the runner lists every peer's key
    control: ControlSpec | None = None  # a control swarm runs alongside (see [control])
    seats: int = 0  # shards the data is split into (0: one per [[peer]])

    @property
    def shards(self) -> int:
        return self.seats or len(self.peers)

    def peer(self, name: str) -> PeerSpec:
        for p in self.peers:
            if p.name == name:
                return p
        raise KeyError(name)

    def flags_for(self, name: str) -> dict[str, Any]:
        """[node] flags merged with the peer's overrides (the peer wins)."""
        return {**self.node, **self.peer(name).flags}

    def event_by_id(self, event_id: str) -> Event:
        for e in self.events:
            if e.id == event_id:
                return e
        raise KeyError(event_id)

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


# --- entry points ------------------------------------------------------------------------------


def load_scenario(path: str | Path, node_check: NodeCheck | None = None) -> Scenario:
    """Read and validate a scenario file; raise `ScenarioError` (one line) on any problem.
    Without `node_check`, the [node] and [[peer]] option tables are checked for form only."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ScenarioError(f"{path}: cannot read: {exc.strerror or exc}") from None
    return parse_scenario_text(
        text, source=str(path), default_name=path.stem, node_check=node_check
    )


def parse_scenario_text(
    text: str,
    source: str = "<string>",
    default_name: str = "scenario",
    node_check: NodeCheck | None = None,
) -> Scenario:
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ScenarioError(f"{source}: not valid TOML: {exc}") from None
    return parse_scenario(data, source=source, default_name=default_name, node_check=node_check)


def parse_scenario(
    data: Mapping[str, Any],
    source: str = "<string>",
    default_name: str = "scenario",
    node_check: NodeCheck | None = None,
) -> Scenario:
    """Validate a decoded TOML document. Every error names the file and the offending key."""
    try:
        return _parse(data, source, default_name, node_check)
    except ScenarioError as exc:
        raise ScenarioError(f"{source}: {exc}") from None


# --- parsing -----------------------------------------------------------------------------------


def _parse(
    data: Mapping[str, Any], source: str, default_name: str, node_check: NodeCheck | None
) -> Scenario:
    no_unknown(data, _TOP_KEYS, "top level")
    sc = table(data, "scenario", required=True)
    no_unknown(sc, _SCENARIO_KEYS, "[scenario]")
    duration = number(
        sc, "duration", "[scenario]", required=True, lo=0.0, hi=MAX_DURATION, open_lo=True
    )
    sample_every = number(sc, "sample_every", "[scenario]", default=1.0, lo=0.05, hi=60.0)
    sample_timeout = number(
        sc, "sample_timeout", "[scenario]", default=min(0.8 * sample_every, 1.0), lo=0.01, hi=60.0
    )
    params_every = number(sc, "params_every", "[scenario]", default=0.0, lo=0.0, hi=MAX_DURATION)
    ready_timeout = number(sc, "ready_timeout", "[scenario]", default=60.0, lo=1.0, hi=3600.0)
    stop_grace = number(sc, "stop_grace", "[scenario]", default=5.0, lo=0.0, hi=600.0)
    name = string(sc, "name", "[scenario]", default=default_name)
    secret = string(sc, "secret", "[scenario]", default="") or None
    if "secret" in sc and secret is None:
        raise ScenarioError("[scenario]: 'secret' must not be empty")
    description = string(sc, "description", "[scenario]", default="")
    admission = string(sc, "admission", "[scenario]", default="")
    if admission not in ("", "trust"):
        raise ScenarioError(f"[scenario]: admission = {admission!r}: only 'trust' is set here")

    node = _flags(table(data, "node"), "[node]", node_check)
    raw_peers = data.get("peer")
    if not isinstance(raw_peers, list) or not raw_peers:
        raise ScenarioError("needs at least one [[peer]] table")
    peers = [_peer(i, p, node_check) for i, p in enumerate(raw_peers)]
    names = [p.name for p in peers]
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        raise ScenarioError(f"[[peer]] name {dupes[0]!r} is used twice")

    raw_events = data.get("event", [])
    if not isinstance(raw_events, list):
        raise ScenarioError("'event' must be an array of tables ([[event]])")
    events = [parse_event(i, e, set(names), duration) for i, e in enumerate(raw_events)]
    events.sort(key=lambda e: e.at)  # stable: ties keep file order
    ids = [e.id for e in events if e.id is not None]
    if len(ids) != len(set(ids)):
        raise ScenarioError(f"event id {next(i for i in ids if ids.count(i) > 1)!r} is used twice")
    control = _control(table(data, "control"), names, node_check)
    late = {e.peer for e in events if e.action == "join"}
    peers = [dataclasses.replace(p, late=p.name in late) for p in peers]
    if all(p.late for p in peers):
        raise ScenarioError("every peer is a late joiner: at least one must start at t = 0")
    check_timeline(events, {p.name: p.late for p in peers})

    raw_asserts = data.get("assert", [])
    if not isinstance(raw_asserts, list):
        raise ScenarioError("'assert' must be an array of tables ([[assert]])")
    scenario = Scenario(
        name=name,
        description=description,
        duration=duration,
        node=node,
        peers=tuple(peers),
        events=tuple(events),
        assertions=(),
        sample_every=sample_every,
        sample_timeout=sample_timeout,
        params_every=params_every,
        ready_timeout=ready_timeout,
        stop_grace=stop_grace,
        source=source,
        secret=secret,
        trust=admission == "trust",
        control=control,
        # an outside attacker's seat keeps its shard: the control's slow peer trains on it
        seats=len(peers) + (control is not None and control.peer not in names),
    )
    asserts = []
    for i, raw in enumerate(raw_asserts):
        where = f"[[assert]] #{i + 1}"
        if not isinstance(raw, Mapping):
            raise ScenarioError(f"{where} must be a table")
        raw = dict(raw)
        must_fail = raw.pop("must_fail", False)
        if not isinstance(must_fail, bool):
            raise ScenarioError(f"{where}: must_fail must be true or false")
        kind = raw.pop("kind", None)
        if not isinstance(kind, str):
            raise ScenarioError(f"{where} lacks 'kind'")
        try:
            params = validate_assertion(kind, raw, scenario)
        except ScenarioError as exc:
            raise ScenarioError(f"{where} ({kind}): {exc}") from None
        asserts.append(AssertionSpec(kind=kind, params=params, must_fail=must_fail))
    return dataclasses.replace(scenario, assertions=tuple(asserts))


def _control(
    raw: Mapping[str, Any], names: list[str], node_check: NodeCheck | None
) -> ControlSpec | None:
    if not raw:
        return None
    raw = dict(raw)
    peer = raw.pop("peer", None)
    if not isinstance(peer, str) or not _NAME_RE.match(peer):
        raise ScenarioError(f"[control]: 'peer' must match [a-z0-9][a-z0-9_-]*, got {peer!r}")
    flags = _flags(raw, "[control]", node_check)
    if "byzantine" in flags:
        raise ScenarioError("[control]: the control's peer is honest: no 'byzantine'")
    return ControlSpec(peer=peer, flags=flags)


def _peer(index: int, raw: Any, node_check: NodeCheck | None) -> PeerSpec:
    where = f"[[peer]] #{index + 1}"
    if not isinstance(raw, Mapping):
        raise ScenarioError(f"{where} must be a table")
    raw = dict(raw)
    name = raw.pop("name", None)
    if not isinstance(name, str) or not _NAME_RE.match(name):
        raise ScenarioError(f"{where}: 'name' must match [a-z0-9][a-z0-9_-]*, got {name!r}")
    where = f"[[peer]] {name!r}"
    return PeerSpec(name=name, index=index, flags=_flags(raw, where, node_check))


def _flags(raw: Mapping[str, Any], where: str, node_check: NodeCheck | None) -> dict[str, Any]:
    flags: dict[str, Any] = {}
    for key, value in raw.items():
        flag = key.replace("_", "-")
        if flag in RUNNER_FLAGS:
            raise ScenarioError(f"{where}: '{key}' is set by the chaos runner, not the scenario")
        if isinstance(value, list):
            if not all(isinstance(v, (str, int, float)) and not isinstance(v, bool) for v in value):
                raise ScenarioError(f"{where}: '{key}' list items must be strings or numbers")
        elif isinstance(value, float) and not math.isfinite(value):
            raise ScenarioError(f"{where}: '{key}' must be finite")
        elif not isinstance(value, (str, int, float, bool)):
            raise ScenarioError(f"{where}: '{key}' must be a string, number, boolean or list")
        flags[flag] = value
    if node_check is not None:
        try:
            node_check(raw, where, RUNNER_FLAGS)
        except SwarmnodeError as exc:
            raise ScenarioError(str(exc)) from None
    _check_flag_values(flags, where)
    return flags


def _check_flag_values(flags: Mapping[str, Any], where: str) -> None:
    """Catch the spec-valued flags early, so a typo fails before any process starts."""
    try:
        if isinstance(flags.get("fault"), str):
            parse_fault_spec(flags["fault"])
        if isinstance(flags.get("byzantine"), str):
            parse_byzantine(flags["byzantine"])
    except FaultSpecError as exc:
        raise ScenarioError(f"{where}: {exc}") from None


# --- small typed getters -----------------------------------------------------------------------


def flag_argv(flags: Mapping[str, Any]) -> list[str]:
    """`{"model": "mlp:64", "x": true, "l": [1, 2]}` -> `["--model", "mlp:64", "--x", "--l", "1,2"]`."""
    argv: list[str] = []
    for key, value in flags.items():
        if value is False:
            continue
        argv.append(f"--{key}")
        if value is True:
            continue
        if isinstance(value, list):
            value = ",".join(str(v) for v in value)
        argv.append(str(value))
    return argv
