"""Convergence benchmark: do sharded peers that exchange parameters learn like one peer?

Real `swarmnode start` processes on 127.0.0.1. For each `--partition` it runs:

- `single`: one peer on the whole train set (the baseline), `--steps` steps;
- `swarm`: `--peers` peers with `--exchange average`, peer i on `--shard i/N`, `--steps` each;
- `alone`: the same shards with no exchange (N separate one-peer swarms): the contrast.

Every `--sample-every` seconds it pulls every peer's parameters (POST /v1/params, as a peer
would) and records the largest pairwise L2 distance, absolute and relative to the mean model
norm. At the end each peer's final test accuracy comes from its `--summary-json`. All runs are
paced alike (`--slowdown`): at full speed the digits MLP takes thousands of local steps in the
time one exchange round needs, and the exchange would barely matter.

    .venv/bin/python scripts/bench_convergence.py
    .venv/bin/python scripts/bench_convergence.py --partition iid --steps 3000 --json out.json
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import os
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from gossip.codec import encode_control  # noqa: E402
from gossip.wire import decode_params  # noqa: E402

# One BLAS thread per peer: several peers share the machine.
ENV = {**os.environ, "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
READY_TIMEOUT_S = 60.0
# Peers start held (a few steps/s) and are released together once all are up: a start takes
# seconds of imports on a loaded box, and the founder would spend its budget alone meanwhile.
# Not slower: a new factor takes effect after the pause in progress, (old - 1) x one step time.
HOLD = ["--slowdown", "200"]


@dataclass
class Sample:
    t: float  # seconds since the first peer was ready
    reachable: int
    max_dist: float | None  # largest pairwise L2 distance between the peers' parameters
    rel_dist: float | None  # the same over the mean parameter norm


@dataclass
class RunResult:
    name: str
    accs: dict[str, float]  # peer name -> final test accuracy
    rounds: dict[str, int] = field(default_factory=dict)  # peer name -> exchange rounds applied
    samples: list[Sample] = field(default_factory=list)
    wall_s: float = 0.0


class PeerProc:
    """One `swarmnode start` process with a free port, a log and a summary file."""

    def __init__(self, workdir: Path, name: str, args: Sequence[str]) -> None:
        self.name = name
        self.dir = workdir / name
        self.dir.mkdir(parents=True, exist_ok=True)
        self.summary = self.dir / "summary.json"
        ready = self.dir / "ready.json"
        cmd = [sys.executable, "-m", "node.cli", "start", "--listen", "127.0.0.1:0",
               "--ready-file", str(ready), "--summary-json", str(self.summary), *args]  # fmt: skip
        self._log = open(self.dir / "log.txt", "wb")
        self.proc = subprocess.Popen(
            cmd, cwd=ROOT, stdout=self._log, stderr=subprocess.STDOUT, env=ENV
        )
        self._ready = ready
        self.addr = ""

    def wait_ready(self) -> PeerProc:
        deadline = time.monotonic() + READY_TIMEOUT_S
        while not self._ready.exists():
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"peer {self.name} did not start:\n{self.tail()}")
            time.sleep(0.05)
        self.addr = json.loads(self._ready.read_text())["addr"]
        return self

    def set_slowdown(self, factor: float) -> None:
        body = encode_control("slowdown", sender="bench", factor=float(factor))
        req = urllib.request.Request(f"http://{self.addr}/v1/admin/slowdown", data=body)
        with urllib.request.urlopen(req, timeout=5.0) as r:
            r.read()

    def params(self, timeout: float = 2.0) -> np.ndarray | None:
        """Current parameters, or None if the peer is gone (finished or failed)."""
        if self.proc.poll() is not None:
            return None
        req = urllib.request.Request(
            f"http://{self.addr}/v1/params", data=encode_control("pull", sender="bench")
        )
        try:
            with urllib.request.urlopen(req, timeout=timeout) as r:
                _, vec = decode_params(r.read())
        except OSError:
            return None
        return np.asarray(vec, dtype=np.float64)

    def wait(self, timeout: float) -> dict[str, Any]:
        """Wait for the exit; its summary ({} if it wrote none)."""
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self._log.close()
        if not self.summary.exists():
            print(f"  {self.name}: no summary (exit {self.proc.returncode}):\n{self.tail()}")
            return {}
        return json.loads(self.summary.read_text())

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self._log.close()

    def tail(self, n: int = 8) -> str:
        lines = (self.dir / "log.txt").read_text(errors="replace").splitlines()
        return "\n".join(lines[-n:])


def max_pairwise(vectors: list[np.ndarray]) -> tuple[float, float] | None:
    """(largest pairwise distance, the same over the mean norm); differences taken directly."""
    if len(vectors) < 2:
        return None
    dist = max(float(np.linalg.norm(a - b)) for a, b in itertools.combinations(vectors, 2))
    norm = float(np.mean([np.linalg.norm(v) for v in vectors])) or 1.0
    return dist, dist / norm


def common_args(opts: argparse.Namespace, partition: str) -> list[str]:
    return ["--data", opts.data, "--model", opts.model, "--steps", str(opts.steps), "--lr", str(opts.lr),
            "--batch-size", str(opts.batch_size), "--eval-every", str(opts.eval_every),
            "--partition", partition,
            "--seed", str(opts.seed)]  # fmt: skip


def run(
    name: str,
    per_peer: list[list[str]],
    join: bool,
    opts: argparse.Namespace,
    pace: float,
) -> RunResult:
    """Start the peers held (each joining the first when `join`), release them together at
    `--slowdown pace`, sample their parameters until all have exited."""
    sample_every, timeout = opts.sample_every, opts.timeout
    with tempfile.TemporaryDirectory(prefix="bench-conv-") as tmp:
        peers: list[PeerProc] = []
        try:
            # The first peer founds the swarm; the others start together (a start is seconds of
            # imports on a loaded box) and join it.
            peers.append(PeerProc(Path(tmp), "p0", [*per_peer[0], *HOLD]).wait_ready())
            seed = ["--join", peers[0].addr] if join else []
            for i, args in enumerate(per_peer[1:], 1):
                peers.append(PeerProc(Path(tmp), f"p{i}", [*args, *seed, *HOLD]))
            for p in peers:
                p.wait_ready()
            for p in peers:  # released together (they started held: see HOLD)
                p.set_slowdown(pace)
            t0 = time.monotonic()
            result = RunResult(name, {})
            while any(p.proc.poll() is None for p in peers) and time.monotonic() - t0 < timeout:
                vecs = [v for v in (p.params() for p in peers) if v is not None]
                d = max_pairwise(vecs)
                result.samples.append(
                    Sample(time.monotonic() - t0, len(vecs), *(d if d else (None, None)))
                )
                time.sleep(sample_every)
            for p in peers:
                summary = p.wait(max(1.0, timeout - (time.monotonic() - t0)))
                result.accs[p.name] = float(summary.get("test_accuracy", math.nan))
                result.rounds[p.name] = int(summary.get("exchange_applied", 0))
            result.wall_s = time.monotonic() - t0
            return result
        finally:
            for p in peers:
                p.kill()


def run_partition(opts: argparse.Namespace, partition: str) -> list[RunResult]:
    base = common_args(opts, partition)
    n = opts.peers
    sharded = [[*base, "--shard", f"{i}/{n}"] for i in range(n)]
    exchange = ["--exchange", "average", "--sync-every", str(opts.sync_every)]
    runs = [
        # Pacing changes no figure of a lone peer (its steps are deterministic): full speed.
        ("single", [base], False, 1.0),
        ("swarm", [[*a, *exchange] for a in sharded], True, opts.slowdown),
        ("alone", sharded, False, opts.slowdown),
    ]
    results = []
    for name, per_peer, join, pace in runs:
        if name not in opts.runs and name != "single":  # the baseline is always needed
            continue
        print(f"[{partition}] running {name} ({len(per_peer)} peer(s)) ...", flush=True)
        results.append(run(name, per_peer, join, opts, pace))
    return results


def fmt_acc(x: float) -> str:
    return "  -   " if math.isnan(x) else f"{x * 100:5.1f}%"


def print_table(partition: str, results: list[RunResult]) -> None:
    single = results[0].accs["p0"]
    print(
        f"\n== partition {partition}: final test accuracy (single-peer baseline {fmt_acc(single)})"
    )
    print(f"{'run':8} {'per-peer accuracy':36} {'min':>6} {'mean':>6} {'min - single':>13}")
    for r in results:
        accs = list(r.accs.values())
        per = " ".join(fmt_acc(a) for a in accs)
        gap = (min(accs) - single) * 100
        print(f"{r.name:8} {per:36} {fmt_acc(min(accs))} {fmt_acc(float(np.mean(accs)))} "
              f"{gap:+12.1f}p")  # fmt: skip
    for r in results[1:]:
        rounds = ", ".join(str(n) for n in r.rounds.values())
        print(f"\n-- {r.name}: exchange rounds applied per peer: {rounds}")
        print(f"-- {r.name}: max pairwise parameter distance over time (all peers reachable)")
        print(f"{'t (s)':>6} {'max L2':>9} {'/ norm':>8}")
        for s in r.samples:
            if s.max_dist is not None and s.reachable == len(r.accs):
                print(f"{s.t:6.1f} {s.max_dist:9.4f} {s.rel_dist:8.4f}")


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--partition", action="append", help="iid or dirichlet:A (repeatable)")
    p.add_argument("--peers", type=int, default=4)
    p.add_argument("--data", default="digits")
    p.add_argument("--model", default="mlp:32")
    p.add_argument("--steps", type=int, default=2000)
    p.add_argument("--lr", type=float, default=0.05)
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--sync-every", type=int, default=10)
    p.add_argument("--eval-every", type=int, default=100)
    p.add_argument("--slowdown", type=float, default=20.0)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--sample-every", type=float, default=1.0)
    p.add_argument("--timeout", type=float, default=300.0, help="per run, seconds")
    p.add_argument("--runs", default="swarm,alone", help="which of swarm,alone to run")
    p.add_argument("--json", help="also write every figure to this file")
    return p.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    opts = parse_args(argv)
    opts.runs = opts.runs.split(",")
    partitions = opts.partition or ["iid", "dirichlet:0.5"]
    report: dict[str, Any] = {"options": vars(opts), "partitions": {}}
    for partition in partitions:
        results = run_partition(opts, partition)
        print_table(partition, results)
        report["partitions"][partition] = [
            {
                "run": r.name,
                "accs": r.accs,
                "wall_s": r.wall_s,
                "samples": [vars(s) for s in r.samples],
            }
            for r in results
        ]
    if opts.json:
        Path(opts.json).write_text(json.dumps(report, indent=2, default=float))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
