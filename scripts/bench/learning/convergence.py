"""Convergence benchmark: does a swarm learn as well as one peer, and sooner?

Real `swarmnode start` processes on 127.0.0.1, every one paced alike, as a compute-bound GPU
peer: `--step-time S` (the default) makes every step take S seconds (its compute plus a sleep),
so simulated compute dominates, 8 peers fit on 2 cores, and other load on the box does not
change the pace as long as a step's compute stays under S; `--step-time 0 --slowdown F` is the
older pacing (a sleep of (F - 1) x the measured step, which CPU contention inflates).
Configurations, each with the same steps per peer (`--steps`):

- `single`: one peer on the whole train set (the baseline);
- `ideal`: the synchronous data-parallel ideal for N peers: one peer, batch N x B, the learning
  rate the best of `--ideal-lr-mults` x lr. It runs unpaced; its time is its steps x the
  single peer's paced step time (N workers computing B each, an all-reduce that costs nothing);
- `swarm-N-MODE`: N peers on `--shard i/N` for each N in `--peers`, MODE in `--modes`:
  `average` and `robust` are the defaults of this code (group push-pull + outer step; ss-clip);
  `*-unscaled` the same with `--lr-scale none` (the default `auto`'s where the lr is
  constant), `*-constant` with `--lr-schedule constant` (the lr defaults before 2026-12-02),
  `*-linear`, `*-sqrt` and
  `average-adaptive` with that `--lr-scale`; `average-replace` and `robust-replace` the mix
  before the delta rule (`--mix-rule replace`); `average-noadjust` and `robust-noadjust`
  without the logit adjustment (`--logit-adjust 0`); `old-average` is the behaviour before the group
  (`--group 1 --outer-lr 1 --outer-momentum 0`, pairwise AD-PSGD) and `old-robust` Krum with
  plain mixing;
- `attack-KIND`: 5 peers, robust, one of them serving `--byzantine KIND`, beside 5 honest
  peers with each of old-average, average, old-robust (Krum) and robust. KIND `gone` runs the
  4 honest peers of that swarm alone (shards 0-3 of 5): the ceiling of any rule, since the
  liar's shard is lost with it.

Per peer it reads every evaluation from the peer's log (accuracy = mean of the last 3, which is
steadier than the last one), polls /v1/status every `--poll` s for time to accuracy (from the
peer's own release to its first evaluation at >= single's accuracy - 1 point) and takes bytes
sent and exchange rounds from its summary. It writes a markdown table, a JSON file and a
matplotlib PNG (worst peer's accuracy against wall time, one line per configuration).

    .venv/bin/python scripts/bench/learning/convergence.py --data signal:2000,64,20 \\
        --model mlp:128 --out runs/conv-signal
"""

from __future__ import annotations

import argparse
import json
import math
import re
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from swarmnode.fault.chaos.processes import start_peer
from swarmnode.gossip.auth.operator import OperatorKey
from swarmnode.gossip.wire.control import encode_control

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT))  # this script runs as a file: its sibling modules by full name
from scripts.bench.learning.convergence_report import (  # noqa: E402
    PeerResult,
    RunResult,
    figures,
    markdown,
    plot,
)

# One BLAS thread per peer: several peers share the machine.
READY_TIMEOUT_S = 90.0
# Peers start held (a few steps/s) and are released together once all are up: a start takes
# seconds of imports on a loaded box, and the founder would spend its budget alone meanwhile.
HOLD = ["--slowdown", "200"]
EVAL_LINE = re.compile(
    r"step\s+(\d+)(?:/\d+)?\s+loss\s+\S+\s+test_loss\s+\S+\s+test_acc\s+([\d.]+)%"
)
OLD_AVERAGE = ["--group", "1", "--outer-lr", "1", "--outer-momentum", "0", "--lr-scale", "none"]
UNSCALED = ["--lr-scale", "none"]
MODES = {
    "average": ["--exchange", "average"],
    "robust": ["--exchange", "robust"],
    "robust-nocut": [
        "--exchange",
        "robust",
        "--backward-limit",
        "0",
    ],  # before gossip/robust/heading.py
    "old-average": ["--exchange", "average", *OLD_AVERAGE],
    "old-robust": ["--exchange", "robust", "--aggregator", "krum", *OLD_AVERAGE],
    "average-unscaled": ["--exchange", "average", *UNSCALED],
    "robust-unscaled": ["--exchange", "robust", *UNSCALED],
    "average-linear": ["--exchange", "average", "--lr-scale", "linear"],
    "robust-linear": ["--exchange", "robust", "--lr-scale", "linear"],
    "average-sqrt": ["--exchange", "average", "--lr-scale", "sqrt"],
    "average-adaptive": ["--exchange", "average", "--lr-scale", "adaptive"],
    "robust-sqrt": ["--exchange", "robust", "--lr-scale", "sqrt"],
    # the lr defaults before 2026-12-02: a constant lr (so `--lr-scale auto` scales nothing)
    "average-constant": ["--exchange", "average", "--lr-schedule", "constant"],
    "robust-constant": ["--exchange", "robust", "--lr-schedule", "constant"],
    "average-plain-outer": ["--exchange", "average", "--outer-lr", "1", "--outer-momentum", "0"],
    # the mix before the delta rule (gossip/exchange/delta_rule.py): steps trained during a round x (1-w)
    "average-replace": ["--exchange", "average", "--mix-rule", "replace"],
    "robust-replace": ["--exchange", "robust", "--mix-rule", "replace"],
    # without the logit adjustment on a label-skewed shard (node/train/data/label_prior.py)
    "average-noadjust": ["--exchange", "average", "--logit-adjust", "0"],
    "robust-noadjust": ["--exchange", "robust", "--logit-adjust", "0"],
}


OPERATOR = OperatorKey.generate()  # this run's operator key: the peers get its public half


class PeerProc:
    """One `swarmnode start` process (`fault.chaos.processes`) with a summary file, and the
    accuracy timeline this bench samples from its /v1/status."""

    def __init__(self, workdir: Path, name: str, args: Sequence[str]) -> None:
        self.name = name
        self.dir = workdir / name
        self.dir.mkdir(parents=True, exist_ok=True)
        self.summary = self.dir / "summary.json"
        pub = self.dir / "operator.pub"  # admin/slowdown releases the held peers: signed
        pub.write_bytes(OPERATOR.public_pem())
        admin = ["--enable-admin", "--admin-key", str(pub)]
        self.peer = start_peer(
            ["--summary-json", str(self.summary), *admin, *args], workdir, name, cwd=ROOT
        )
        self.proc = self.peer.proc
        self.log_path = self.peer.log_path
        self.addr = ""
        self.timeline: list[tuple[float, float]] = []

    def wait_ready(self) -> PeerProc:
        self.addr = self.peer.wait_ready(time.monotonic() + READY_TIMEOUT_S).addr
        return self

    def set_pace(self, factor: float, step_s: float) -> None:
        body = encode_control("slowdown", sender="bench", factor=float(factor), step_s=step_s)
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
            self.kill()
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

    def tail(self, n: int = 8) -> str:
        return self.peer.log_tail(n)


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
                    p.set_pace(pace if not opts.step_time else 1.0, opts.step_time)
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
    if opts.delay:  # every exchange request waits: a round spans delay / step-time more steps
        base += ["--fault", f"delay={opts.delay}"]
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
                if attack == "gone":  # the ceiling: 4 honest peers, the 5th shard lost with it
                    per, liar = per[:4], None
                else:
                    per[4], liar = [*per[4], "--byzantine", attack], 4
                results.append(
                    run(f"attack-{attack}-{mode}", partition, per, opts, opts.slowdown, liar)
                )
    return results


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
    p.add_argument(
        "--step-time",
        type=float,
        default=0.02,
        help="every paced step takes this many seconds (0: pace by --slowdown)",
    )
    p.add_argument("--slowdown", type=float, default=20.0, help="with --step-time 0")
    p.add_argument(
        "--delay",
        default="",
        metavar="TIME",
        help="swarm peers only: delay every exchange request by TIME (`--fault delay=TIME`, "
        "e.g. 150ms), so that a round spans many steps, as over a slow link",
    )
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
