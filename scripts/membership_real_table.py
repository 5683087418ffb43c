"""The table of the real-process membership bench (scripts/membership_real.py), and `run_real`,
the `--mode real` entry point of scripts/bench_membership.py: measure, then print.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Iterable
from pathlib import Path

from membership_real import (
    HEAVY_BATCH,
    HEAVY_MODEL,
    RealOptions,
    RealReport,
    Watch,
    measure_real,
)
from swarmnode.gossip.membership.service import MembershipConfig


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
