"""Convergence benchmark: does a swarm learn as well as one peer, and sooner?

Real `swarmnode start` processes on 127.0.0.1, every one paced alike (`--slowdown`: the sleep
after each step is (slowdown - 1) x its compute, so simulated compute dominates and 8 peers fit
on 2 cores). Configurations, each with the same steps per peer (`--steps`):

- `single`: one peer on the whole train set (the baseline);
- `ideal`: the synchronous data-parallel ideal for N peers: one peer, batch N x B, the learning
  rate the best of `--ideal-lr-mults` x lr. It runs unpaced; its time is its steps x the
  single peer's paced step time (N workers computing B each, an all-reduce that costs nothing);
- `swarm-N-MODE`: N peers on `--shard i/N` for each N in `--peers`, MODE in `--modes`:
  `average` and `robust` are the defaults of this code (group push-pull + outer step; ss-clip);
  `old-average` is the behaviour before it (`--group 1 --outer-lr 1 --outer-momentum 0`,
  pairwise AD-PSGD) and `old-robust` Krum with plain mixing;
- `attack-KIND`: 5 peers, robust, one of them serving `--byzantine KIND`, beside 5 honest
  peers with each of old-average, average, old-robust (Krum) and robust.

Per peer it reads every evaluation from the peer's log (accuracy = mean of the last 3, which is
steadier than the last one), polls /v1/status every `--poll` s for time to accuracy (from the
peer's own release to its first evaluation at >= single's accuracy - 1 point) and takes bytes
sent and exchange rounds from its summary. It writes a markdown table, a JSON file and a
matplotlib PNG (worst peer's accuracy against wall time, one line per configuration).

    .venv/bin/python scripts/bench_convergence.py --data signal:2000,64,20 --model mlp:128 \
        --out runs/conv-signal
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
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

from swarmnode.gossip.codec import encode_control  # noqa: E402
from swarmnode.gossip.operator import OperatorKey  # noqa: E402

# One BLAS thread per peer: several peers share the machine.
ENV = {**os.environ, "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
READY_TIMEOUT_S = 90.0
# Peers start held (a few steps/s) and are released together once all are up: a start takes
# seconds of imports on a loaded box, and the founder would spend its budget alone meanwhile.
HOLD = ["--slowdown", "200"]
LAST = 3  # evaluations averaged into a peer's final accuracy
EVAL_LINE = re.compile(
    r"step\s+(\d+)(?:/\d+)?\s+loss\s+\S+\s+test_loss\s+\S+\s+test_acc\s+([\d.]+)%"
)
OLD_AVERAGE = ["--group", "1", "--outer-lr", "1", "--outer-momentum", "0"]
MODES = {
    "average": ["--exchange", "average"],
    "robust": ["--exchange", "robust"],
    "old-average": ["--exchange", "average", *OLD_AVERAGE],
    "old-robust": ["--exchange", "robust", "--aggregator", "krum", *OLD_AVERAGE],
    "robust-plain": ["--exchange", "robust", "--outer-lr", "1", "--outer-momentum", "0"],
    "group-plain": ["--exchange", "average", "--outer-lr", "1", "--outer-momentum", "0"],
    "average-gentle": ["--exchange", "average", "--outer-momentum", "0.5"],
}


@dataclass
class PeerResult:
    name: str
    evals: list[tuple[int, float]]  # (step, accuracy) from the log
    timeline: list[tuple[float, float]]  # (seconds since release, accuracy) from /v1/status
    summary: dict[str, Any]
    honest: bool = True

    @property
    def final(self) -> float:
        accs = [a for _, a in self.evals[-LAST:]]
        return float(np.mean(accs)) if accs else math.nan

    def time_to(self, target: float) -> float | None:
        return next((t for t, a in self.timeline if a >= target), None)

    def step_to(self, target: float) -> int | None:
        return next((s for s, a in self.evals if a >= target), None)


@dataclass
class RunResult:
    name: str
    partition: str
    peers: list[PeerResult] = field(default_factory=list)
    wall_s: float = 0.0
    note: str = ""

    @property
    def honest(self) -> list[PeerResult]:
        return [p for p in self.peers if p.honest]

    @property
    def worst(self) -> float:
        return min(p.final for p in self.honest)

    @property
    def mean(self) -> float:
        return float(np.mean([p.final for p in self.honest]))


OPERATOR = OperatorKey.generate()  # this run's operator key: the peers get its public half


class PeerProc:
    """One `swarmnode start` process with a free port, a log and a summary file."""

    def __init__(self, workdir: Path, name: str, args: Sequence[str]) -> None:
        self.name = name
        self.dir = workdir / name
        self.dir.mkdir(parents=True, exist_ok=True)
        self.summary = self.dir / "summary.json"
        self.log_path = self.dir / "log.txt"
        ready = self.dir / "ready.json"
        pub = self.dir / "operator.pub"  # admin/slowdown releases the held peers: signed
        pub.write_bytes(OPERATOR.public_pem())
        cmd = [sys.executable, "-m", "swarmnode", "start", "--listen", "127.0.0.1:0",
               "--ready-file", str(ready), "--summary-json", str(self.summary),
               "--enable-admin", "--admin-key", str(pub), *args]  # fmt: skip
        self._log = open(self.log_path, "wb")
        self.proc = subprocess.Popen(
            cmd, cwd=ROOT, stdout=self._log, stderr=subprocess.STDOUT, env=ENV
        )
        self._ready = ready
        self.addr = ""
        self.timeline: list[tuple[float, float]] = []

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
        body = OPERATOR.sign("admin/slowdown", body, to=self.addr)
        req = urllib.request.Request(f"http://{self.addr}/v1/admin/slowdown", data=body)
        with urllib.request.urlopen(req, timeout=5.0) as r:
            r.read()

    def poll(self, t: float) -> None:
        """Record the latest evaluated accuracy (a new one only)."""
        if self.proc.poll() is not None:
            return
        try:
            with urllib.request.urlopen(f"http://{self.addr}/v1/status", timeout=1.0) as r:
                acc = json.loads(r.read())["self"]["acc"]
        except (OSError, ValueError, KeyError):
            return
        if acc is not None and (not self.timeline or self.timeline[-1][1] != acc):
            self.timeline.append((t, float(acc)))

    def finish(self, timeout: float, honest: bool = True) -> PeerResult:
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self._log.close()
        text = self.log_path.read_text(errors="replace")
        evals = [(int(s), float(a) / 100) for s, a in EVAL_LINE.findall(text)]
        summary = json.loads(self.summary.read_text()) if self.summary.exists() else {}
        if not summary:
            print(f"  {self.name}: no summary (exit {self.proc.returncode}):\n{self.tail()}")
        return PeerResult(self.name, evals, self.timeline, summary, honest)

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self._log.close()

    def tail(self, n: int = 8) -> str:
        return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-n:])


def base_args(opts: argparse.Namespace, partition: str, batch: int, lr: float) -> list[str]:
    return ["--data", opts.data, "--model", opts.model, "--steps", str(opts.steps),
            "--lr", f"{lr:g}", "--weight-decay", str(opts.weight_decay),
            "--batch-size", str(batch), "--eval-every", str(opts.eval_every),
            "--partition", partition, "--seed", str(opts.seed),
            "--sync-every", str(opts.sync_every)]  # fmt: skip


def run(
    name: str,
    partition: str,
    per_peer: list[list[str]],
    opts: argparse.Namespace,
    pace: float | None,
    byzantine: int | None = None,
) -> RunResult:
    """Start the peers held (all joining the first), release them together at `--slowdown
    pace` (None: full speed, no hold), poll them until all have exited."""
    with tempfile.TemporaryDirectory(prefix="bench-conv-") as tmp:
        procs: list[PeerProc] = []
        hold = HOLD if pace is not None else []
        try:
            procs.append(PeerProc(Path(tmp), "p0", [*per_peer[0], *hold]).wait_ready())
            for i, args in enumerate(per_peer[1:], 1):
                procs.append(PeerProc(Path(tmp), f"p{i}", [*args, "--join", procs[0].addr, *hold]))
            for p in procs:
                p.wait_ready()
            if pace is not None:
                for p in procs:  # released together (they started held: see HOLD)
                    p.set_slowdown(pace)
            t0 = time.monotonic()
            while (
                any(p.proc.poll() is None for p in procs) and time.monotonic() - t0 < opts.timeout
            ):
                for p in procs:
                    p.poll(time.monotonic() - t0)
                time.sleep(opts.poll)
            left = max(1.0, opts.timeout - (time.monotonic() - t0))
            result = RunResult(name, partition)
            result.peers = [p.finish(left, honest=(i != byzantine)) for i, p in enumerate(procs)]
            result.wall_s = time.monotonic() - t0
            return result
        finally:
            for p in procs:
                p.kill()


def swarm_args(opts: argparse.Namespace, partition: str, n: int, mode: str) -> list[list[str]]:
    base = base_args(opts, partition, opts.batch_size, opts.lr)
    return [[*base, "--shard", f"{i}/{n}", *MODES[mode]] for i in range(n)]


def run_partition(opts: argparse.Namespace, partition: str) -> list[RunResult]:
    say = lambda s: print(f"[{partition}] {s}", flush=True)  # noqa: E731
    results = []
    say("single ...")
    results.append(
        run(
            "single",
            partition,
            [base_args(opts, partition, opts.batch_size, opts.lr)],
            opts,
            opts.slowdown,
        )
    )
    for n in opts.peers:
        best: RunResult | None = None
        for mult in opts.ideal_lr_mults:
            lr = opts.lr * (n if mult == "n" else math.sqrt(n) if mult == "sqrt" else float(mult))
            say(f"ideal-{n}: batch {n * opts.batch_size}, lr {lr:g} ...")
            r = run(f"ideal-{n}", partition,
                    [base_args(opts, partition, n * opts.batch_size, lr)], opts, None)  # fmt: skip
            r.note = f"batch {n * opts.batch_size}, lr {lr:g}"
            if best is None or r.worst > best.worst:
                best = r
        assert best is not None
        results.append(best)
        for mode in opts.modes:
            say(f"swarm-{n}-{mode} ...")
            results.append(
                run(
                    f"swarm-{n}-{mode}",
                    partition,
                    swarm_args(opts, partition, n, mode),
                    opts,
                    opts.slowdown,
                )
            )
    if partition in opts.attack_partitions:
        clean = [(m, f"clean-{m}-5") for m in opts.clean_modes]
        for mode, name in clean:
            say(f"{name} ...")
            results.append(
                run(name, partition, swarm_args(opts, partition, 5, mode), opts, opts.slowdown)
            )
        for mode in opts.attack_modes:
            for attack in opts.attacks:
                say(f"attack {attack} (1 of 5, {mode}) ...")
                per = swarm_args(opts, partition, 5, mode)
                per[4] = [*per[4], "--byzantine", attack]
                results.append(
                    run(f"attack-{attack}-{mode}", partition, per, opts, opts.slowdown, 4)
                )
    return results


def figures(results: list[RunResult]) -> list[dict[str, Any]]:
    """One row per run: accuracy, time to single - 1 point, bytes, exchange rate."""
    single = results[0]
    target = single.worst - 0.01
    single_step_s = single.wall_s / max(1, single.peers[0].summary.get("steps_this_run", 1))
    rows = []
    for r in results:
        times = [p.time_to(target) for p in r.honest]
        if r.name.startswith("ideal"):
            step = r.peers[0].step_to(target)
            times = [None if step is None else step * single_step_s]
        reached = [t for t in times if t is not None]
        rate = [p.summary.get("steps_per_exchange") for p in r.honest]
        rows.append({
            "run": r.name,
            "note": r.note,
            "worst": r.worst,
            "mean": r.mean,
            "worst_minus_single": r.worst - single.worst,
            "per_peer": [p.final for p in r.honest],
            # None when a peer never reached the target: then the slowest time is unknown
            "time_to_target_worst_s": max(reached) if len(reached) == len(times) else None,
            "time_to_target_first_s": min(reached) if reached else None,
            "peers_reaching_target": f"{len(reached)}/{len(times)}",
            "wall_s": r.wall_s,
            "bytes_sent_per_peer": float(
                np.mean([p.summary.get("exchange_bytes_sent", 0) for p in r.honest])
            ),
            "steps_per_exchange": float(np.mean([x for x in rate if x])) if any(rate) else None,
        })  # fmt: skip
    single_time = rows[0]["time_to_target_worst_s"]
    for row in rows:
        t = row["time_to_target_worst_s"]
        row["time_vs_single"] = t / single_time if t is not None and single_time else None
    return rows


def markdown(partition: str, rows: list[dict[str, Any]], target: float) -> str:
    out = [f"\n### {partition} (target: single - 1 point = {target * 100:.1f}%)\n",
           "| run | worst / mean acc | worst - single | time to target (worst peer) | "
           "x single | peers at target | MB sent / peer | steps / exchange |",
           "|---|---|---|---|---|---|---|---|"]  # fmt: skip
    for r in rows:
        t = r["time_to_target_worst_s"]
        x = r["time_vs_single"]
        spe = r["steps_per_exchange"]
        name = r["run"] + (f" ({r['note']})" if r["note"] else "")
        out.append(
            f"| {name} | {r['worst'] * 100:.1f} / {r['mean'] * 100:.1f}% | "
            f"{r['worst_minus_single'] * 100:+.1f} | {'-' if t is None else f'{t:.1f} s'} | "
            f"{'-' if x is None else f'{x:.2f}'} | {r['peers_reaching_target']} | "
            f"{r['bytes_sent_per_peer'] / 1e6:.1f} | {'-' if spe is None else f'{spe:.0f}'} |"
        )
    return "\n".join(out)


def worst_curve(peers: list[PeerResult]) -> list[tuple[float, float]]:
    """(t, the lowest of the peers' latest accuracies) once every peer has evaluated."""
    out = []
    for t in sorted({t for p in peers for t, _ in p.timeline}):
        latest = [next((a for tt, a in reversed(p.timeline) if tt <= t), None) for p in peers]
        if all(a is not None for a in latest):
            out.append((t, min(a for a in latest if a is not None)))
    return out


def plot(report: dict[str, Any], results: dict[str, list[RunResult]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    parts = list(results)
    fig, axes = plt.subplots(1, len(parts), figsize=(7 * len(parts), 5), squeeze=False)
    for ax, part in zip(axes[0], parts, strict=True):
        runs = results[part]
        single_step_s = runs[0].wall_s / max(1, runs[0].peers[0].summary.get("steps_this_run", 1))
        for r in runs:
            if r.name.startswith("ideal"):
                ev = r.peers[0].evals
                ax.plot([s * single_step_s for s, _ in ev], [a * 100 for _, a in ev], "--",
                        label=f"{r.name} (computed)")  # fmt: skip
                continue
            worst = worst_curve(r.honest)
            if worst:
                ax.plot([t for t, _ in worst], [a * 100 for _, a in worst], label=r.name)
        target = report["partitions"][part]["target"] * 100
        ax.axhline(target, color="grey", lw=0.8, ls=":", label="single - 1 pt")
        ax.set_title(f"{report['options']['data']} {report['options']['model']}, {part}")
        ax.set_xlabel("wall time since release (s)")
        ax.set_ylabel("worst honest peer's test accuracy (%)")
        ax.set_ylim(max(0, target - 40), min(100, target + 12))
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=90)


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--partition", action="append", help="iid or dirichlet:A (repeatable)")
    p.add_argument("--data", default="signal:2000,64,20")
    p.add_argument("--model", default="mlp:128")
    p.add_argument("--peers", default="4,8", help="swarm sizes, comma-separated")
    p.add_argument("--modes", default="old-average,average,robust")
    p.add_argument("--attacks", default="alie:30,ipm:10", help="empty: no attack runs")
    p.add_argument("--attack-partitions", default="dirichlet:0.5")
    p.add_argument("--clean-modes", default="old-average,average,old-robust,robust")
    p.add_argument("--attack-modes", default="robust", help="modes the attacked runs use")
    p.add_argument("--ideal-lr-mults", default="sqrt,n", help="x lr: numbers, sqrt(N), n")
    p.add_argument("--steps", type=int, default=2000)
    p.add_argument("--lr", type=float, default=0.05)
    p.add_argument("--weight-decay", type=float, default=5e-4)
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--sync-every", type=int, default=10)
    p.add_argument("--eval-every", type=int, default=100)
    p.add_argument("--slowdown", type=float, default=20.0)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--poll", type=float, default=0.2, help="status poll interval, seconds")
    p.add_argument("--timeout", type=float, default=300.0, help="per run, seconds")
    p.add_argument("--out", default="runs/bench-convergence", help="directory for md/json/png")
    opts = p.parse_args(argv)
    opts.peers = [int(x) for x in opts.peers.split(",") if x]
    opts.modes = [m for m in opts.modes.split(",") if m]
    unknown = [m for m in opts.modes if m not in MODES]
    if unknown:
        p.error(f"unknown mode(s) {unknown}; known: {', '.join(MODES)}")
    opts.attacks = [a for a in opts.attacks.split(",") if a]
    opts.clean_modes = [m for m in opts.clean_modes.split(",") if m]
    opts.attack_modes = [m for m in opts.attack_modes.split(",") if m]
    unknown += [m for m in opts.clean_modes + opts.attack_modes if m not in MODES]
    if unknown:
        p.error(f"unknown mode(s) {unknown}; known: {', '.join(MODES)}")
    opts.attack_partitions = [a for a in opts.attack_partitions.split(",") if a]
    opts.ideal_lr_mults = [m for m in opts.ideal_lr_mults.split(",") if m]
    return opts


def main(argv: Sequence[str] | None = None) -> int:
    opts = parse_args(argv)
    partitions = opts.partition or ["iid", "dirichlet:0.5"]
    out = Path(opts.out)
    out.mkdir(parents=True, exist_ok=True)
    report: dict[str, Any] = {"options": vars(opts), "partitions": {}}
    all_results: dict[str, list[RunResult]] = {}
    md = [f"`{' '.join(sys.argv)}`"]
    for partition in partitions:
        results = run_partition(opts, partition)
        all_results[partition] = results
        rows = figures(results)
        target = results[0].worst - 0.01
        report["partitions"][partition] = {
            "target": target,
            "rows": rows,
            "curves": {r.name: {p.name: p.evals for p in r.peers} for r in results},
        }
        md.append(markdown(partition, rows, target))
        print(md[-1], flush=True)
        (out / "report.json").write_text(json.dumps(report, indent=1, default=float))
        (out / "report.md").write_text("\n".join(md) + "\n")
    plot(report, all_results, out / "plot.png")
    print(f"\nwrote {out}/report.md, report.json, plot.png")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
