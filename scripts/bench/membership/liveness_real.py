"""The `--mode real` part of scripts/bench/membership/liveness.py (not meant to be run by hand).

`swarmnode start` processes on 127.0.0.1 at default membership settings, every figure read from
the peers' own `GET /v1/status`: join / SIGKILL / restart / SIGTERM cycles, a soak for false
deaths while every peer trains flat out, and heartbeats beside multi-second steps. The
integration test tests/integration/test_membership_real.py runs its short version, so the
bench and the test cannot drift apart.
"""

from __future__ import annotations

import argparse
import http.client
import math
import os
import signal
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from swarmnode.gossip.membership.service import MembershipConfig

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

from swarmnode.gossip.membership.failure import ALIVE, DEAD, LEFT, SUSPECT

from tests.integration.peers import Peer, start_swarm
from tests.waiting import wait_for

# --- real processes ------------------------------------------------------------------------
#
# `--mode real`: `swarmnode start` processes on 127.0.0.1 (tests/integration/peers.py starts
# them, one BLAS thread each), every figure read from the peers' own GET /v1/status, polled from
# one thread per observer so that one slow answer does not delay the others' readings. A time
# "to dead" is from the moment the bench sent the signal to the first poll that shows the state:
# it includes up to one poll interval and one status round trip.

READY_TIMEOUT_S = 90.0  # a start is seconds of imports, more on a loaded box
SEEN_TIMEOUT_S = 30.0  # far beyond any target: a miss shows as "inf", not as a hang
LEARNED_ACC = 0.8  # the swarm must beat chance clearly before a joiner's accuracy means anything
HEAVY_MODEL = "mlp:4096,4096"  # 17 M parameters: ...
HEAVY_BATCH = 1437  # ... on the whole digits train set per step: ~2 s of BLAS on one core here


StatusCheck = Callable[[dict[str, Any]], bool]
# what one status request of a busy (or just killed) peer may fail with: poll again
STATUS_ERRORS = (OSError, http.client.HTTPException, ValueError)


def _member(status: dict[str, Any], name: str) -> dict[str, Any] | None:
    for m in status["members"]:
        if m.get("name") == name:
            return m
    return None


def shows(name: str, state: str, above_incarnation: int = -1) -> StatusCheck:
    """A check that an observer's status lists the peer named `name` (`--name`, every peer
    here has one) in `state` (at a newer incarnation)."""

    def check(status: dict[str, Any]) -> bool:
        m = _member(status, name)
        return m is not None and m["state"] == state and m["incarnation"] > above_incarnation

    return check


class FirstSeen:
    """Polls every observer's status (one thread each) until `check` holds there.

    Start it *before* the event it waits for; `wait()` gives, per observer, the monotonic time
    of the first poll that showed it (inf if none did within `timeout`)."""

    def __init__(
        self, observers: Sequence[Peer], check: StatusCheck, poll: float, timeout: float
    ) -> None:
        self._deadline = time.monotonic() + timeout
        self._pool = ThreadPoolExecutor(len(observers), thread_name_prefix="first-seen")
        self._futures = [self._pool.submit(self._poll, o, check, poll) for o in observers]

    def _poll(self, observer: Peer, check: StatusCheck, poll: float) -> float:
        while time.monotonic() < self._deadline:
            try:
                if check(observer.status(timeout=1.0)):
                    return time.monotonic()
            except STATUS_ERRORS:  # a status request timed out on a loaded box: poll again
                pass
            time.sleep(poll)
        return math.inf

    def wait(self) -> list[float]:
        try:
            return [f.result() for f in self._futures]
        finally:
            self._pool.shutdown()


@dataclass
class PairWatch:
    """What one observer's table said about one subject over a watch."""

    polls: int = 0
    max_silence: float = 0.0
    suspect_episodes: int = 0  # alive -> suspect transitions seen
    dead_episodes: int = 0  # any state -> dead seen
    missing: int = 0  # polls where the subject was not in the table at all
    first_heartbeat: int | None = None
    last_heartbeat: int | None = None
    last_state: str = ALIVE


@dataclass
class Watch:
    """`watch()`'s result: per (observer, subject) pair, and each observer's own step count."""

    seconds: float
    pairs: dict[tuple[str, str], PairWatch]
    steps: dict[str, tuple[int, int]]  # observer -> (first, last) step seen
    failed_polls: int

    def total(self, attr: str) -> int:
        return sum(getattr(p, attr) for p in self.pairs.values())

    def worst_silence(self) -> tuple[float, str]:
        (obs, subj), p = max(self.pairs.items(), key=lambda kv: kv[1].max_silence)
        return p.max_silence, f"{subj} in {obs}'s table"


def watch(peers: Sequence[Peer], seconds: float, poll: float) -> Watch:
    """Poll every peer's status for `seconds`: how each saw every other (all are running)."""
    ids = {p.peer_id: p.name for p in peers}
    end = time.monotonic() + seconds
    pairs: dict[tuple[str, str], PairWatch] = {}
    steps: dict[str, tuple[int, int]] = {}
    failed: dict[str, int] = {}

    def follow(observer: Peer) -> None:
        mine = {pid: PairWatch() for pid in ids if pid != observer.peer_id}
        first_step = last_step = None
        failed[observer.name] = 0
        while time.monotonic() < end:
            try:
                status = observer.status(timeout=1.0)
            except STATUS_ERRORS:
                failed[observer.name] += 1
                time.sleep(poll)
                continue
            last_step = status["self"]["step"]
            first_step = last_step if first_step is None else first_step
            for pid, pw in mine.items():
                _observe(pw, _member(status, ids[pid]))  # listed by name, keyed by id
            time.sleep(poll)
        for pid, pw in mine.items():
            pairs[(observer.name, ids[pid])] = pw
        steps[observer.name] = (first_step or 0, last_step or 0)

    with ThreadPoolExecutor(len(peers), thread_name_prefix="watch") as pool:
        for f in [pool.submit(follow, p) for p in peers]:
            f.result()
    return Watch(seconds, pairs, steps, sum(failed.values()))


def _observe(pw: PairWatch, m: dict[str, Any] | None) -> None:
    pw.polls += 1
    if m is None:
        pw.missing += 1
        return
    state = m["state"]
    if state == SUSPECT and pw.last_state == ALIVE:
        pw.suspect_episodes += 1
    if state == DEAD and pw.last_state != DEAD:
        pw.dead_episodes += 1
    pw.last_state = state
    pw.max_silence = max(pw.max_silence, m["last_heard_s"])
    if pw.first_heartbeat is None:
        pw.first_heartbeat = m["heartbeat"]
    pw.last_heartbeat = m["heartbeat"]


@dataclass
class Cycle:
    """One peer's life in a running swarm, every time in seconds."""

    start_to_ready: float
    start_to_seen: list[float]  # launch -> alive in each other peer's table
    ready_to_seen: list[float]  # ready -> alive in each (negative: seen before it was ready)
    first_acc: float  # the joiner's first evaluation, on the model it synced
    swarm_acc: float  # the swarm's (median of the others) at that moment
    kill_to_dead: list[float]
    restart_to_ready: float
    restart_ready_to_seen: list[float]  # ready -> alive at the new incarnation in each table
    incarnations: tuple[int, int]  # before the kill, after the restart
    term_to_left: list[float]
    term_to_exit: float
    exit_code: int


@dataclass
class RealReport:
    peers: int
    model: str
    poll: float
    fresh_acc: float
    cycles: list[Cycle] = field(default_factory=list)
    soak: Watch | None = None
    heavy: Watch | None = None
    heavy_step_s: float = math.nan
    heavy_term_to_exit: float = math.nan
    load: list[tuple[float, float, float]] = field(default_factory=list)


@dataclass
class RealOptions:
    peers: int = 4
    cycles: int = 3
    soak: float = 300.0
    heavy: float = 15.0
    model: str = "mlp:512"
    poll: float = 0.03
    soak_poll: float = 0.1

    @property
    def peer_args(self) -> list[str]:
        return ["--steps", "0", "--model", self.model]


def measure_real(
    opts: RealOptions, workdir: Path, say: Callable[[str], None] = print
) -> RealReport:
    """Run every real-process measurement `opts` asks for; the processes are gone on return."""
    report = RealReport(opts.peers, opts.model, opts.poll, _fresh_accuracy(opts.model))
    report.load.append(os.getloadavg())
    if opts.cycles or opts.soak:
        _measure_swarm(opts, workdir, report, say)
    if opts.heavy:
        say(f"heavy steps: {HEAVY_MODEL}, batch {HEAVY_BATCH}, watched {opts.heavy:g} s")
        report.heavy, report.heavy_step_s, report.heavy_term_to_exit = measure_heavy(
            workdir, opts.heavy, opts.soak_poll
        )
    report.load.append(os.getloadavg())
    return report


def _measure_swarm(
    opts: RealOptions, workdir: Path, report: RealReport, say: Callable[[str], None]
) -> None:
    # n - 1 resident peers; the n-th comes and goes (join, kill, restart, leave) in each trial
    say(f"starting {opts.peers - 1} resident peers ({opts.model})")
    base = start_swarm(
        workdir,
        [[*opts.peer_args] for _ in range(opts.peers - 1)],
        READY_TIMEOUT_S,
    )
    extra: list[Peer] = []
    try:
        wait_for(lambda: _all_alive(base), SEEN_TIMEOUT_S, "the resident peers to see each other")
        wait_for(lambda: all(_acc(p) >= LEARNED_ACC for p in base), 120, "the swarm to learn")
        for t in range(opts.cycles):
            x = Peer(workdir, f"x{t}", *opts.peer_args,
                     "--eval-every", "1000000", "--join", base[0].addr)  # fmt: skip
            extra.append(x)
            report.cycles.append(run_cycle(base, x, opts.poll))
            say(f"cycle {t + 1}/{opts.cycles} done")
        if opts.soak:
            s = Peer(workdir, "s", *opts.peer_args, "--join", base[0].addr)
            extra.append(s)
            swarm = [*base, s.start(READY_TIMEOUT_S)]
            wait_for(lambda: _all_alive(swarm), SEEN_TIMEOUT_S, "all peers to see each other")
            say(f"soak: {len(swarm)} peers training flat out for {opts.soak:g} s")
            report.soak = watch(swarm, opts.soak, opts.soak_poll)
    finally:
        for p in [*extra, *base]:
            p.stop()


def run_cycle(base: Sequence[Peer], x: Peer, poll: float) -> Cycle:
    """`x` joins the running swarm `base`, is SIGKILLed, restarted, SIGTERMed."""
    pid = x.name  # started with --name NAME: known before it is ready (its id is not)
    seen = FirstSeen(base, shows(pid, ALIVE), poll, SEEN_TIMEOUT_S)
    launched, ready = _start_timed(x)
    first_acc = _acc(x)  # --eval-every 1e6: still the evaluation of the model it synced
    swarm_acc = statistics.median(_acc(p) for p in base)
    seen_at = seen.wait()
    incarnation = x.status()["self"]["incarnation"]

    seen = FirstSeen(base, shows(pid, DEAD), poll, SEEN_TIMEOUT_S)
    killed = time.monotonic()
    x.signal(signal.SIGKILL)
    dead_at = seen.wait()
    x.wait_exit(10)

    seen = FirstSeen(base, shows(pid, ALIVE, above_incarnation=incarnation), poll, SEEN_TIMEOUT_S)
    relaunched, reready = _start_timed(x)
    back_at = seen.wait()
    new_incarnation = x.status()["self"]["incarnation"]

    seen = FirstSeen(base, shows(pid, LEFT), poll, SEEN_TIMEOUT_S)
    termed = time.monotonic()
    x.signal(signal.SIGTERM)
    code = x.wait_exit(60)
    exited = time.monotonic()
    left_at = seen.wait()
    return Cycle(
        start_to_ready=ready - launched,
        start_to_seen=[t - launched for t in seen_at],
        ready_to_seen=[t - ready for t in seen_at],
        first_acc=first_acc,
        swarm_acc=swarm_acc,
        kill_to_dead=[t - killed for t in dead_at],
        restart_to_ready=reready - relaunched,
        restart_ready_to_seen=[t - reready for t in back_at],
        incarnations=(incarnation, new_incarnation),
        term_to_left=[t - termed for t in left_at],
        term_to_exit=exited - termed,
        exit_code=code,
    )


def _start_timed(p: Peer) -> tuple[float, float]:
    """Launch `p` and wait until ready: (launch, ready) on the monotonic clock. "Ready" is when
    the peer wrote its ready file (its mtime), not when our polling noticed it."""
    wall0, launched = time.time(), time.monotonic()
    p.launch().wait_ready(READY_TIMEOUT_S)
    return launched, launched + (p.ready_file.stat().st_mtime - wall0)


def measure_heavy(workdir: Path, seconds: float, poll: float) -> tuple[Watch, float, float]:
    """A peer whose every training step holds a core for seconds, beside a fast one: how long
    did each go unheard in the other's table, the heavy peer's mean step time, and how long it
    took to exit after a SIGTERM that came in the middle of a step."""
    common = ["--steps", "0", "--model", HEAVY_MODEL]
    light = Peer(workdir, "light", *common)
    # the heavy peer joins (its state sync pulls from the light one, which answers between two
    # short steps) rather than seeds: a pull from it waits for its current step to end
    # (--eval-every 1: /v1/status's step moves only at evaluations)
    heavy = Peer(workdir, "heavy", *common, "--batch-size",
                 str(HEAVY_BATCH), "--eval-every", "1")  # fmt: skip
    try:
        light.start(READY_TIMEOUT_S)
        heavy.args = (*heavy.args, "--join", light.addr)
        heavy.start(READY_TIMEOUT_S)
        pair = [light, heavy]
        wait_for(lambda: _all_alive(pair), SEEN_TIMEOUT_S, "light and heavy to see each other")
        w = watch(pair, seconds, poll)
        termed = time.monotonic()
        heavy.signal(signal.SIGTERM)
        heavy.wait_exit(60)
        term_to_exit = time.monotonic() - termed
    finally:
        for p in (heavy, light):
            p.stop()
    first, last = w.steps["heavy"]
    return w, seconds / (last - first) if last > first else math.inf, term_to_exit


def _all_alive(peers: Sequence[Peer]) -> bool:
    for p in peers:
        status = p.status()
        if not all(shows(o.name, ALIVE)(status) for o in peers if o is not p):
            return False
    return True


def _acc(p: Peer) -> float:
    acc = p.status()["self"]["acc"]
    return math.nan if acc is None else float(acc)


def _fresh_accuracy(model: str) -> float:
    """Test accuracy of an untrained model of this spec (seed 0, as the peers start)."""
    from swarmnode.node.train.build import build_trainer
    from swarmnode.node.train.config import NodeConfig

    trainer, data, _ = build_trainer(NodeConfig(model=model, device="cpu").validate())
    return trainer.evaluate(data.X_test, data.y_test)[1]


# --- the table, and `run_real`: the `--mode real` entry point of liveness.py ---


def print_real(r: RealReport, opts: RealOptions, elapsed: float) -> None:
    cfg = MembershipConfig()
    print(
        f"# {r.peers} `swarmnode start` processes on 127.0.0.1, {os.cpu_count()} cores, 1 BLAS "
        f"thread each, model {r.model} training flat out (--steps 0); membership defaults: "
        f"interval {cfg.gossip_interval} s, suspect {cfg.suspect_after} s, dead "
        f"{cfg.dead_after} s; status polled every {r.poll * 1e3:.0f} ms from one thread per "
        f"observer; load average {_load(r.load)}; {elapsed:.0f} s in all"
    )
    if r.cycles:
        _print_cycles(r)
    if r.soak is not None:
        _print_watch(f"soak, {r.peers} peers", r.soak, opts.soak_poll)
    if r.heavy is not None:
        _print_watch(f"heavy steps ({HEAVY_MODEL}, batch {HEAVY_BATCH})", r.heavy, opts.soak_poll)
        print(f"  heavy peer's mean step time over the watch: {r.heavy_step_s:.2f} s")
        print(f"  SIGTERM mid-step -> process exit: {r.heavy_term_to_exit:.2f} s (target 5)")


def _print_cycles(r: RealReport) -> None:
    ts = r.cycles
    print(f"\n{'measure (seconds)':<52} {'n':>3} {'median':>7} {'max':>7} {'target':>7}")
    rows: list[tuple[str, list[float], str]] = [
        ("SIGKILL -> dead, in each other peer's status", _pool(t.kill_to_dead for t in ts), "3"),
        ("SIGTERM -> left, in each other peer's status", _pool(t.term_to_left for t in ts), "1"),
        ("SIGTERM -> process exit", [t.term_to_exit for t in ts], "5"),
        ("join: process start -> ready", [t.start_to_ready for t in ts], ""),
        ("join: process start -> alive in every other", [max(t.start_to_seen) for t in ts], ""),
        ("join: ready -> alive in every other (<=0: before)", [max(t.ready_to_seen) for t in ts],
         "2"),
        ("restart: process start -> ready", [t.restart_to_ready for t in ts], ""),
        ("restart: ready -> alive (new incarnation) in all",
         [max(t.restart_ready_to_seen) for t in ts], "2"),
    ]  # fmt: skip
    for what, values, target in rows:
        print(
            f"{what:<52} {len(values):>3} {statistics.median(values):>7.2f} "
            f"{max(values):>7.2f} {target:>7}"
        )
    accs = ", ".join(f"{t.first_acc:.3f} (swarm {t.swarm_acc:.3f})" for t in ts)
    print(f"joiner's first accuracy: {accs}; an untrained model: {r.fresh_acc:.3f}")
    incs = ", ".join(f"{a} -> {b}" for a, b in (t.incarnations for t in ts))
    codes = ", ".join(str(t.exit_code) for t in ts)
    print(f"restart incarnations: {incs}; SIGTERM exit codes: {codes}")


def _print_watch(title: str, w: Watch, poll: float) -> None:
    silence, where = w.worst_silence()
    polls = w.total("polls")
    print(
        f"\n{title}: {w.seconds:g} s, {polls} member readings ({poll * 1e3:.0f} ms polls, "
        f"{w.failed_polls} failed)\n"
        f"  live peers seen suspect: {w.total('suspect_episodes')}, dead: "
        f"{w.total('dead_episodes')}, missing: {w.total('missing')}\n"
        f"  max last_heard_s: {silence:.2f} s ({where})"
    )
    rates = ", ".join(f"{n} {(b - a) / w.seconds:.1f}" for n, (a, b) in sorted(w.steps.items()))
    print(f"  steps/s per peer: {rates}")
    beats = ", ".join(
        f"{s} in {o}: +{(p.last_heartbeat or 0) - (p.first_heartbeat or 0)}"
        for (o, s), p in sorted(w.pairs.items())
    )
    print(f"  heartbeat advance: {beats}")


def _pool(lists: Iterable[list[float]]) -> list[float]:
    return [v for values in lists for v in values]


def _load(samples: list[tuple[float, float, float]]) -> str:
    return " -> ".join(f"{s[0]:.1f}" for s in samples)


def run_real(args: argparse.Namespace) -> int:
    opts = RealOptions(
        peers=args.peers,
        cycles=args.trials,
        soak=args.soak,
        heavy=args.heavy,
        model=args.model,
        poll=args.poll,
        soak_poll=args.soak_poll,
    )
    if opts.peers < 2:
        print("--peers must be >= 2", file=sys.stderr)
        return 2
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="bench-membership-") as tmp:
        workdir = Path(args.workdir) if args.workdir else Path(tmp)
        report = measure_real(opts, workdir, say=lambda s: print(f"... {s}", flush=True))
    print_real(report, opts, time.monotonic() - started)
    return 0
