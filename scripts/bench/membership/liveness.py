"""Membership benchmark.

`--mode sim` (this file's simulation part): a round-based simulation of n peers in one process
that calls the very merge / digest / sweep / sampling code the real peers run
(`swarmnode.gossip.membership.table.MemberTable`, `swarmnode.gossip.membership.sampling.sample_peers`) on a virtual clock. Messages
skip msgpack and the event loop; everything else is the real protocol: each round every live
peer, at its own instant within the round, bumps its heartbeat, judges the others, and
push-pulls its digest with `fanout` random live-or-suspect peers. (It leaves out the real
loop's probe of one dead member per round, which only matters when a "dead" peer comes back.)
`--loss` drops that fraction of messages (each way) to stress the failure detector.

It measures, for each n:
- `bootstrap`: rounds until n - 1 peers, joined at t = 0 through one seed, list each other alive;
- `join`: rounds until the n-th peer, joining through a random peer, is alive in every table;
- `max silence`: the longest a live member went without a heartbeat advance in any table, over
  `--steady` rounds (the false-death margin is dead_after minus this);
- `false`: live members seen suspect / dead by anyone during those rounds (the slow member
  apart, below);
- `detect`: seconds from a crash until the last peer marks it dead (median and max of trials).
With `--slow K` one member gossips (and beats) in a round only with chance 1 / K (a loaded box
or a slow link: its beats come K intervals apart on average, irregularly; its skipped ticks are credited as a
stalled loop's are); `slow dead` counts the times a peer saw it die while it lived (each
refuted later), `slow detect` the seconds from its crash until the last peer marked it dead. `--detector fixed` judges every member by the
configured thresholds alone (the detector before it measured each member's gaps), `both` runs
the two on the same seeds.

    .venv/bin/python scripts/bench/membership/liveness.py --mode sim
    .venv/bin/python scripts/bench/membership/liveness.py --mode sim --sizes 16,64 --loss 0.2
    .venv/bin/python scripts/bench/membership/liveness.py --mode sim --sizes 4,16 --slow 4 \\
        --steady 400 --detector both

`--mode real` (scripts/bench/membership/liveness_real.py): `swarmnode start` processes on 127.0.0.1
at default membership settings, every figure read from the peers' own `GET /v1/status`:
- n - 1 resident peers train flat out (`--steps 0`); in each of `--trials` cycles an n-th peer
  joins (process start -> ready -> alive in every other table; its first accuracy against the
  swarm's and an untrained model's), is SIGKILLed (-> dead in each other table), restarted with
  the same id and checkpoint dir (ready -> alive at a newer incarnation in each table), and
  SIGTERMed (-> left in each table);
- `--soak S`: n peers train flat out for S seconds while every status is polled: live peers
  seen suspect / dead (false alarms), the longest `last_heard_s` of a live peer, steps/s;
- `--heavy S`: a peer whose every training step holds a core for seconds (a 17 M-parameter MLP
  on the whole train set per step) beside a fast one, watched S seconds the same way.

    .venv/bin/python scripts/bench/membership/liveness.py --mode real       # ~7 min: 300 s soak
    .venv/bin/python scripts/bench/membership/liveness.py --mode real --trials 1 --soak 10 \\
        --heavy 10
"""

from __future__ import annotations

import argparse
import gc
import math
import random
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

from swarmnode.gossip.membership.failure import (
    ALIVE,
    DEAD,
    SUSPECT,
    detection_deadline,
    spread_rounds,
)
from swarmnode.gossip.membership.sampling import sample_peers
from swarmnode.gossip.membership.service import MembershipConfig
from swarmnode.gossip.membership.table import MemberTable

from scripts.bench.membership.liveness_real import run_real

TARGETS = (ALIVE, SUSPECT)
MAX_ROUNDS = 200


class FixedTable(MemberTable):
    """Every member judged by the thresholds in effect, its own heartbeat gaps ignored."""

    def limits(self, e: Any) -> tuple[float, float]:
        return self.suspect_after, self.dead_after


@dataclass
class SimPeer:
    table: MemberTable
    rng: random.Random
    up: bool = True
    last_tick: float | None = None  # the slow member's last tick


@dataclass
class Swarm:
    """n peers exchanging digests on a virtual clock of `cfg.gossip_interval` per round."""

    cfg: MembershipConfig
    rng: random.Random
    loss: float = 0.0
    table_cls: type[MemberTable] = MemberTable
    slow_p: float = 1.0  # the slow member's chance to tick in a round
    slow: SimPeer | None = None
    peers: dict[str, SimPeer] = field(default_factory=dict)  # by address
    round_no: int = 0

    @property
    def now(self) -> float:
        return self.round_no * self.cfg.gossip_interval

    def add(self, i: int) -> SimPeer:
        addr = f"10.0.{i // 256}.{i % 256}:7070"
        table = self.table_cls(f"p{i}", addr, 1, self.cfg.timing)
        peer = SimPeer(table, random.Random(self.rng.getrandbits(64)))
        self.peers[addr] = peer
        return peer

    def join(self, joiner: SimPeer, seed: SimPeer, now: float) -> None:
        """What `Membership.join` and the seed's join route do to the two tables."""
        seed.table.merge([joiner.table.self_entry()], now)
        joiner.table.merge(seed.table.digest(now), now)

    def live(self) -> list[SimPeer]:
        return [p for p in self.peers.values() if p.up]

    def run_round(self, observe: Callable[[SimPeer, float], None] | None = None) -> None:
        """Every live peer ticks once, in random order, spread over the round."""
        order = self.live()
        self.rng.shuffle(order)
        step = self.cfg.gossip_interval / len(order)
        for i, p in enumerate(order):
            now = self.now + i * step
            if observe is not None:
                observe(p, now)
            if p is not self.slow:
                self.tick(p, now)
            elif self.rng.random() < self.slow_p:
                self.absorb_stall(p, now)
                self.tick(p, now)
                p.last_tick = now
        self.round_no += 1

    def absorb_stall(self, p: SimPeer, now: float) -> None:
        """`Membership._absorb_stall`: a tick more than an interval late credits the lost time
        to every silence timer (the slow member was deaf, not the others silent)."""
        interval = self.cfg.gossip_interval
        late = now - (p.last_tick if p.last_tick is not None else now) - interval
        if late > interval:
            p.table.credit(late)

    def tick(self, p: SimPeer, now: float) -> None:
        """`Membership.tick` with synchronous exchanges."""
        p.table.bump()
        p.table.sweep(now)
        targets = sample_peers(
            p.table.members(now, TARGETS), self.cfg.fanout, p.rng, states=TARGETS
        )
        push = p.table.digest(now)
        for m in targets:
            q = self.peers[m.addr]
            if not q.up or self.rng.random() < self.loss:
                continue  # crashed peer or lost request: the caller times out
            q.table.merge(push, now)
            if self.rng.random() < self.loss:
                continue  # lost answer
            p.table.merge(q.table.digest(now), now)


def agreed(swarm: Swarm, on: Callable[[SimPeer, float], bool]) -> bool:
    return all(on(p, swarm.now) for p in swarm.live())


def rounds_until(swarm: Swarm, on: Callable[[SimPeer, float], bool]) -> int:
    start = swarm.round_no
    while not agreed(swarm, on):
        if swarm.round_no - start >= MAX_ROUNDS:
            raise RuntimeError(f"no agreement within {MAX_ROUNDS} rounds")
        swarm.run_round()
    return swarm.round_no - start


def knows_all_alive(n_up: int) -> Callable[[SimPeer, float], bool]:
    return lambda p, now: len(p.table.members(now, (ALIVE,))) == n_up - 1


@dataclass
class Trial:
    bootstrap: int
    join: int
    max_silence: float
    false_suspect: int
    false_dead: int
    detect: float
    slow_dead: int = 0
    slow_detect: float = math.nan


def run_trial(
    n: int,
    cfg: MembershipConfig,
    seed: int,
    loss: float,
    steady: int,
    slow_every: float = 0.0,
    table_cls: type[MemberTable] = MemberTable,
) -> Trial:
    swarm = Swarm(cfg, random.Random(seed), loss, table_cls)
    peers = [swarm.add(i) for i in range(n - 1)]
    if slow_every > 0:
        swarm.slow, swarm.slow_p = peers[1], 1.0 / slow_every
    for p in peers[1:]:
        swarm.join(p, peers[0], swarm.now)
    bootstrap = rounds_until(swarm, knows_all_alive(n - 1))

    newcomer = swarm.add(n - 1)  # the n-th peer
    swarm.join(newcomer, swarm.rng.choice(peers), swarm.now)
    newcomer_id = newcomer.table.self_id
    join = rounds_until(swarm, lambda p, now: p is newcomer or _state(p, newcomer_id, now) == ALIVE)

    silence, false_suspect, false_dead, slow_dead = _steady(swarm, steady)

    victim = swarm.rng.choice(peers[2:] if swarm.slow is not None else peers[1:])
    trial = Trial(bootstrap, join, silence, false_suspect, false_dead, _kill(swarm, victim))
    if swarm.slow is not None:
        trial.slow_dead, trial.slow_detect = slow_dead, _kill(swarm, swarm.slow)
    return trial


def _kill(swarm: Swarm, victim: SimPeer) -> float:
    """Seconds from `victim`'s crash until the last live peer's tombstone of it starts (the
    slow member's own view left out: its stalls are credited to every silence timer, so it
    learns of a death as late as it is deaf, whatever the detector)."""
    victim.up = False
    killed_at = swarm.now
    victim_id = victim.table.self_id
    rounds_until(swarm, lambda p, now: _state(p, victim_id, now) == DEAD)
    # each observer's tombstone starts exactly when its own silence timer ran out (a sweep
    # turns the lazily computed `dead` into that tombstone)
    dead_at = []
    for p in swarm.live():
        if p is swarm.slow:
            continue
        p.table.sweep(swarm.now)
        dead_at.append(p.table._entries[victim_id].tomb_since)
    return max(dead_at) - killed_at


def _state(p: SimPeer, peer_id: str, now: float) -> str | None:
    m = p.table.get(peer_id, now)
    return None if m is None else m.state


def _steady(swarm: Swarm, rounds: int) -> tuple[float, int, int, int]:
    """Longest silence of a live member in any table, false suspects / deaths of the others,
    and how often a peer saw the slow member die (it refutes, and may die again)."""
    worst = 0.0
    suspected: set[tuple[str, str]] = set()
    killed: set[tuple[str, str]] = set()
    slow_id = swarm.slow.table.self_id if swarm.slow is not None else None
    seen: dict[str, str] = {}  # each observer's last view of the slow member
    slow_deaths = 0

    def observe(p: SimPeer, now: float) -> None:
        nonlocal worst, slow_deaths
        if p is swarm.slow:
            return  # its own view, read before its tick absorbs its stall: not a verdict
        for m in p.table.members(now):
            if m.peer_id == slow_id:
                if m.state == DEAD and seen.get(p.table.self_id) != DEAD:
                    slow_deaths += 1
                seen[p.table.self_id] = m.state
                continue
            worst = max(worst, m.last_heard_s)
            if m.state == SUSPECT:
                suspected.add((p.table.self_id, m.peer_id))
            elif m.state == DEAD:
                killed.add((p.table.self_id, m.peer_id))

    for _ in range(rounds):
        swarm.run_round(observe)
    return worst, len(suspected), len(killed), slow_deaths


DETECTORS: dict[str, type[MemberTable]] = {"adaptive": MemberTable, "fixed": FixedTable}


def run_sim(args: argparse.Namespace) -> int:
    cfg = MembershipConfig()
    sizes = [int(s) for s in args.sizes.split(",")]
    detectors = list(DETECTORS) if args.detector == "both" else [args.detector]
    print(
        f"# round-based simulation over swarmnode.gossip.membership.table (virtual clock): "
        f"interval {cfg.gossip_interval} s, fanout {cfg.fanout}, suspect_after "
        f"{cfg.suspect_after} s, dead_after {cfg.dead_after} s, loss {args.loss:g}, "
        f"{args.steady} steady rounds, slow member: {args.slow or 'none'}"
    )
    header = (
        f"{'n':>5} {'detector':>8} {'trials':>6} {'bootstrap':>9} {'join':>5} {'log4(n)':>7} "
        f"{'est':>4} {'max silence s':>13} {'false s/d':>9} {'detect s (med/max)':>18} "
        f"{'bound s':>7} {'slow dead':>9} {'slow detect':>11} {'wall s':>6}"
    )
    print(header)
    for n in sizes:
        for name in detectors:
            print(_sim_row(n, name, cfg, args), flush=True)
    return 0


def _sim_row(n: int, detector: str, cfg: MembershipConfig, args: argparse.Namespace) -> str:
    trials = args.trials if n < 1024 else max(1, args.trials // 3)
    started = time.perf_counter()
    # The tables hold ~n^2 objects and create no reference cycles: the cyclic collector
    # would only rescan them (it tripled the run time at n = 1024).
    gc.disable()
    try:
        results = [
            run_trial(n, cfg, args.seed + t, args.loss, args.steady, args.slow, DETECTORS[detector])
            for t in range(trials)
        ]
    finally:
        gc.enable()
        gc.collect()
    wall = time.perf_counter() - started
    detect = [r.detect for r in results]
    slow = f"{max(r.slow_detect for r in results):11.2f}" if args.slow else f"{'-':>11}"
    return (
        f"{n:>5} {detector:>8} {trials:>6} {_span([r.bootstrap for r in results]):>9} "
        f"{_span([r.join for r in results]):>5} {math.log(n, 4):>7.1f} "
        f"{spread_rounds(n, cfg.fanout):>4} {max(r.max_silence for r in results):>13.2f} "
        f"{sum(r.false_suspect for r in results):>4}/{sum(r.false_dead for r in results):<4} "
        f"{statistics.median(detect):>8.2f} / {max(detect):<7.2f} "
        f"{detection_deadline(cfg.dead_after, cfg.gossip_interval, n, cfg.fanout):>7.2f} "
        f"{sum(r.slow_dead for r in results):>9} {slow} {wall:>6.1f}"
    )


def _span(values: Sequence[int]) -> str:
    lo, hi = min(values), max(values)
    return str(lo) if lo == hi else f"{lo}-{hi}"


MODES: dict[str, Callable[[argparse.Namespace], int]] = {"sim": run_sim, "real": run_real}


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--mode", choices=sorted(MODES), default="sim")
    sim = ap.add_argument_group("sim")
    sim.add_argument("--sizes", default="4,16,64,256,1024", help="comma-separated peer counts")
    sim.add_argument(
        "--trials",
        type=int,
        default=3,
        help="sim: per size (a third of it for 1024+); real: join-kill-restart-leave cycles",
    )
    sim.add_argument("--steady", type=int, default=10, help="rounds watched for false alarms")
    sim.add_argument("--loss", type=float, default=0.0, help="message loss, each way")
    sim.add_argument("--seed", type=int, default=1)
    sim.add_argument(
        "--slow", type=float, default=0.0, help="one member ticks with chance 1/K a round (0: none)"
    )
    sim.add_argument("--detector", choices=[*DETECTORS, "both"], default="adaptive")
    real = ap.add_argument_group("real")
    real.add_argument(
        "--peers", type=int, default=4, help="swarm size, the coming-and-going one included"
    )
    real.add_argument("--model", default="mlp:512", help="the peers' model spec")
    real.add_argument(
        "--soak", type=float, default=300.0, help="seconds watched for false alarms (0: skip)"
    )
    real.add_argument(
        "--heavy",
        type=float,
        default=15.0,
        help="seconds watched beside multi-second steps (0: skip)",
    )
    real.add_argument(
        "--poll", type=float, default=0.03, help="status poll interval while timing an event"
    )
    real.add_argument(
        "--soak-poll", type=float, default=0.1, help="status poll interval of the watches"
    )
    real.add_argument(
        "--workdir", help="keep the peers' logs and checkpoints here (default: a temporary dir)"
    )
    return ap.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    return MODES[args.mode](args)


if __name__ == "__main__":
    sys.exit(main())
