#!/usr/bin/env python
"""The user's own loop through `swarmnode.Swarm` against the built-in loop, on real processes.

    .venv/bin/python scripts/bench/learning/own_loop.py                       # every row, one run
    .venv/bin/python scripts/bench/learning/own_loop.py --runs 3 --out runs/own-loop.json
    .venv/bin/python scripts/bench/learning/own_loop.py --rows torch-4,builtin-4 --steps 300

Rows (`--rows`), each peer on its shard i/N of the bundled digits, all on 127.0.0.1:

- `torch-N`: examples/own_loop_torch.py (AdamW, cosine schedule to 0, gradient clipping at 1);
  N = 1 is the loop alone (`--no-swarm`, the whole training set), N > 1 a founder and N - 1
  joiners, started together (`--wait-peers`);
- `builtin-N`: the same 64-128-10 MLP through swarmnode's own loop (`swarmnode start --model
  mlp:128 --optimizer adamw`, the torch loop's lr and weight decay, `--lr-schedule cosine
  --lr-warmup 0 --lr-floor 0.001`; no gradient clipping: the built-in loop has none), peers
  started held and released together (scripts/bench/learning/convergence.py's `run`);
- `numpy-N`: examples/own_loop_numpy.py (plain SGD, lr 0.05);
- `builtin_torch-N` (not in the default rows: a diagnostic): the built-in loop as `builtin-N`, on
  the torch example's very module and initialisation (examples/own_torch_model.py's `build`,
  through `TorchModel`), so that `torch-N` against it differs only in the loop (torch's AdamW
  and clipping through `Swarm`, or swarmnode's AdamW in its own loop).
- the conv task (not in the default rows; `--rows conv` runs the six below, N = 1 and 4):
  `torch_conv-N`, the torch example's `--model conv` (the built-in `cnn2d:8x8,16k3,p2,64`
  written in torch), `builtin_conv-N` that spec through the built-in loop, and `builtin_torch_conv-N` the built-in loop on the
  torch example's conv module (its `build_conv`, through `TorchModel`).

Every row takes the same steps per peer (`--steps`), batch 32, `--sync-every`, evaluations every
`--eval-every` steps, at full speed (`--step-time 0`) unless paced. Per peer: its late-window
mean (the mean of its test accuracy over the evaluations in the last sixth of its steps),
rounds that landed a mix and utilization (the share of its time spent training, not waiting at
the staleness bound). Per row: the worst peer, the mean, the wall time from release to the
last peer's last evaluation (examples) or exit (built-in). `--runs R` repeats every row with
seed r = 0..R-1 and reports min / mean / max of the worst peer. One BLAS / torch thread a peer.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT))  # scripts.* by full name

from swarmnode.fault.chaos.processes import one_thread_env  # noqa: E402

from scripts.bench.learning import convergence as bc  # noqa: E402

EXAMPLES = {"torch": ROOT / "examples" / "own_loop_torch.py",
            "numpy": ROOT / "examples" / "own_loop_numpy.py"}  # fmt: skip
ALL_ROWS = "torch-1,torch-2,torch-4,builtin-1,builtin-4,numpy-1,numpy-2,numpy-4"
CONV_SPEC = "cnn2d:8x8,16k3,p2,64"  # examples/own_loop_torch.py's `--model conv`
CONV_ROWS = ("torch_conv-1,torch_conv-4,builtin_conv-1,builtin_conv-4,"
             "builtin_torch_conv-1,builtin_torch_conv-4")  # fmt: skip
# the built-in loop's rows: the model each runs (a spec, or a factory on PYTHONPATH=examples/)
BUILTIN_MODELS = {"builtin": "mlp:128", "builtin_torch": "own_torch_model:build",
                  "builtin_conv": CONV_SPEC, "builtin_torch_conv": "own_loop_torch:build_conv"}  # fmt: skip
EXAMPLE_MODELS = {"torch": ("torch", "mlp"), "torch_conv": ("torch", "conv"),
                  "numpy": ("numpy", None)}  # fmt: skip
TORCH_LR, TORCH_WD = 3e-3, 1e-4  # examples/own_loop_torch.py's defaults
FOUNDER_TIMEOUT_S = 90.0  # a torch import on a loaded 2-core box takes seconds
ADDR_LINE = re.compile(r"^swarm at (\S+)$", re.M)
ROUNDS_LINE = re.compile(r"^rounds (\d+) utilization ([\d.]+)$", re.M)


@dataclass
class PeerFig:
    name: str
    late: float  # mean test accuracy over the last sixth of the steps
    rounds: int | None = None
    utilization: float | None = None


@dataclass
class RowRun:
    row: str
    seed: int
    peers: list[PeerFig] = field(default_factory=list)
    wall_s: float = math.nan

    @property
    def worst(self) -> float:
        return min(p.late for p in self.peers)

    @property
    def mean(self) -> float:
        return statistics.mean(p.late for p in self.peers)


def late_mean(evals: Sequence[tuple[int, float]], steps: int) -> float:
    """The mean accuracy of the evaluations past the first five sixths of `steps` (the last
    one if none: a single evaluation of an overfitting model swings by points)."""
    late = [a for s, a in evals if s > steps - steps / 6]
    if not late and evals:
        late = [evals[-1][1]]
    return statistics.mean(late) if late else math.nan


# --- the examples: founder first, its address from its first line, then the joiners ---


def example_args(
    opts: argparse.Namespace, seed: int, i: int, n: int, out: Path, model: str | None = None
) -> list[str]:
    args = ["--shard", f"{i}/{n}", "--steps", str(opts.steps), "--eval-every",
            str(opts.eval_every), "--sync-every", str(opts.sync_every), "--seed", str(seed),
            "--step-time", f"{opts.step_time:g}", "--json", str(out),
            *(["--model", model] if model else [])]  # fmt: skip
    return [*args, "--no-swarm"] if n == 1 else [*args, "--wait-peers", str(n - 1)]


def launch(script: Path, args: list[str], log: Path) -> subprocess.Popen[bytes]:
    with open(log, "ab") as f:  # the child keeps its own descriptor
        return subprocess.Popen(
            [sys.executable, str(script), *args], cwd=ROOT, env=one_thread_env(),
            stdout=f, stderr=subprocess.STDOUT,
        )  # fmt: skip


def wait_addr(proc: subprocess.Popen[bytes], log: Path, deadline: float) -> str:
    """The founder's address, from its `swarm at ADDR` line."""
    while time.monotonic() < deadline:
        m = ADDR_LINE.search(log.read_text(errors="replace"))
        if m:
            return m.group(1)
        if proc.poll() is not None:
            break
        time.sleep(0.1)
    raise RuntimeError(f"the founder printed no address:\n{log.read_text(errors='replace')}")


def wait_all(procs: list[subprocess.Popen[bytes]], deadline: float) -> None:
    for p in procs:
        try:
            p.wait(max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()


def run_example(row: str, n: int, opts: argparse.Namespace, seed: int) -> RowRun:
    result = RowRun(f"{row}-{n}", seed)
    loop, model = EXAMPLE_MODELS[row]
    procs: list[subprocess.Popen[bytes]] = []
    with tempfile.TemporaryDirectory(prefix="bench-own-loop-") as tmp:
        d = Path(tmp)
        try:
            start = time.monotonic()
            args0 = example_args(opts, seed, 0, n, d / "p0.json", model)
            procs.append(launch(EXAMPLES[loop], args0, d / "p0.log"))
            if n > 1:
                addr = wait_addr(procs[0], d / "p0.log", start + FOUNDER_TIMEOUT_S)
                for i in range(1, n):
                    out = d / f"p{i}.json"
                    args = [*example_args(opts, seed, i, n, out, model), "--join", addr]
                    procs.append(launch(EXAMPLES[loop], args, d / f"p{i}.log"))
            wait_all(procs, start + opts.timeout)
            walls = []
            for i, p in enumerate(procs):
                result.peers.append(example_peer(d, i, p.returncode, opts.steps))
                walls.append(json.loads((d / f"p{i}.json").read_text())[-1]["t"])
            result.wall_s = max(walls)
        finally:
            for p in procs:  # a peer left behind by a failure above
                if p.poll() is None:
                    p.kill()
                    p.wait()
    return result


def example_peer(d: Path, i: int, rc: int | None, steps: int) -> PeerFig:
    log = (d / f"p{i}.log").read_text(errors="replace")
    out = d / f"p{i}.json"
    if rc != 0 or not out.exists():
        raise RuntimeError(f"peer p{i} exited {rc}:\n{log[-2000:]}")
    evals = [(e["step"], e["test_acc"]) for e in json.loads(out.read_text())]
    m = ROUNDS_LINE.search(log)
    rounds, util = (int(m.group(1)), float(m.group(2))) if m else (None, None)
    return PeerFig(f"p{i}", late_mean(evals, steps), rounds, util)


# --- the built-in loop: scripts/bench/learning/convergence.py's held start and release ---


def builtin_args(opts: argparse.Namespace, seed: int, i: int, n: int, model: str) -> list[str]:
    return ["--data", "digits", "--model", model, "--optimizer", "adamw",
            "--lr", f"{TORCH_LR:g}", "--weight-decay", f"{TORCH_WD:g}",
            "--lr-schedule", "cosine", "--lr-warmup", "0", "--lr-floor", "0.001",
            "--batch-size", "32", "--steps", str(opts.steps), "--eval-every",
            str(opts.eval_every), "--sync-every", str(opts.sync_every), "--seed", str(seed),
            "--shard", f"{i}/{n}"]  # fmt: skip


def run_builtin(row: str, n: int, opts: argparse.Namespace, seed: int) -> RowRun:
    conv = argparse.Namespace(timeout=opts.timeout, poll=0.2, step_time=opts.step_time)
    model = BUILTIN_MODELS[row]
    if model.startswith("own_"):  # a factory the peers import from examples/ (they inherit this)
        path = os.environ.get("PYTHONPATH", "")
        os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT / "examples"), path) if p)
    per_peer = [builtin_args(opts, seed, i, n, model) for i in range(n)]
    r = bc.run(f"{row}-{n}", "iid", per_peer, conv, 1.0)  # held, released at full pace
    result = RowRun(f"{row}-{n}", seed, wall_s=r.wall_s)
    for p in r.peers:
        if not p.summary:
            raise RuntimeError(f"built-in peer {p.name} left no summary")
        rounds = p.summary.get("exchange_applied") if n > 1 else None
        util = p.summary.get("utilization") if n > 1 else None
        result.peers.append(PeerFig(p.name, late_mean(p.evals, opts.steps), rounds, util))
    return result


# --- the report ---


def run_row(row: str, opts: argparse.Namespace, seed: int) -> RowRun:
    loop, n = row.rsplit("-", 1)
    if loop in BUILTIN_MODELS:
        return run_builtin(loop, int(n), opts, seed)
    return run_example(loop, int(n), opts, seed)


def _opt(v: float | None, fmt: str) -> str:
    return "-" if v is None else format(v, fmt)


def table(rows: list[str], runs: list[RowRun]) -> str:
    head = ("| row | worst peer, min / mean / max (%) | mean peer (%) | per peer, last run (%) "
            "| rounds | utilization | wall (s) |\n|---|---|---|---|---|---|---|")  # fmt: skip
    lines = [head]
    for row in rows:
        rs = [r for r in runs if r.row == row]
        if not rs:
            lines.append(f"| {row} | failed | | | | | |")
            continue
        worst = [r.worst * 100 for r in rs]
        peers = rs[-1].peers
        rounds = [p.rounds for r in rs for p in r.peers if p.rounds is not None]
        util = [p.utilization for r in rs for p in r.peers if p.utilization is not None]
        lines.append(
            f"| {row} | {min(worst):.1f} / {statistics.mean(worst):.1f} / {max(worst):.1f} "
            f"| {statistics.mean(r.mean for r in rs) * 100:.1f} "
            f"| {', '.join(f'{p.late * 100:.1f}' for p in peers)} "
            f"| {_opt(statistics.mean(rounds) if rounds else None, '.0f')} "
            f"| {_opt(statistics.mean(util) if util else None, '.2f')} "
            f"| {statistics.mean(r.wall_s for r in rs):.1f} |"
        )
    return "\n".join(lines)


def goal(runs: list[RowRun], n: int = 4, task: str = "") -> str:
    """The goal: the torch loop through Swarm within 1 point of the built-in loop, n peers
    (`task`: "" the MLP, "_conv" the conv net)."""
    mine = [r for r in runs if r.row == f"torch{task}-{n}"]
    base = [r for r in runs if r.row == f"builtin{task}-{n}"]
    if not mine or not base:
        return f"goal: needs rows torch{task}-{n} and builtin{task}-{n}"
    dw = statistics.mean(r.worst for r in mine) - statistics.mean(r.worst for r in base)
    dm = statistics.mean(r.mean for r in mine) - statistics.mean(r.mean for r in base)
    met = "met" if dw >= -0.01 else "NOT met"
    return (f"goal (torch{task}-{n} within 1 point of builtin{task}-{n}, late-window means): "
            f"{met}: "
            f"worst peer {dw * 100:+.1f} points, mean peer {dm * 100:+.1f} points")  # fmt: skip


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rows", default=ALL_ROWS,
                   help=f"comma-separated (default {ALL_ROWS}), or conv: {CONV_ROWS}")  # fmt: skip
    p.add_argument("--runs", type=int, default=1, help="repeats of every row (seeds 0..R-1)")
    p.add_argument("--steps", type=int, default=600, help="steps per peer, every row")
    p.add_argument("--eval-every", type=int, default=10)
    p.add_argument("--sync-every", type=int, default=10)
    p.add_argument("--step-time", type=float, default=0.0, help="pace every step (s)")
    p.add_argument("--timeout", type=float, default=300.0, help="per row and run (s)")
    p.add_argument("--out", type=Path, default=None, help="write every figure here (JSON)")
    opts = p.parse_args(argv)
    rows = CONV_ROWS if opts.rows == "conv" else opts.rows
    opts.rows = [r.strip() for r in rows.split(",") if r.strip()]
    for row in opts.rows:
        loop, _, n = row.rpartition("-")
        if loop not in (*EXAMPLE_MODELS, *BUILTIN_MODELS) or not n.isdigit() or int(n) < 1:
            loops = ", ".join((*EXAMPLE_MODELS, *BUILTIN_MODELS))
            p.error(f"--rows: {row!r} is not LOOP-N (LOOP: {loops})")
    return opts


def main(argv: Sequence[str] | None = None) -> int:
    opts = parse_args(argv)
    runs: list[RowRun] = []
    t0 = time.monotonic()
    for seed in range(opts.runs):
        for row in opts.rows:  # interleaved: a busier box slows every row of a run alike
            try:
                r = run_row(row, opts, seed)
            except RuntimeError as exc:  # a failed row is reported; the others still run
                print(f"run {seed} {row}: FAILED: {exc}", flush=True)
                continue
            runs.append(r)
            print(f"run {seed} {row}: worst {r.worst:.1%} mean {r.mean:.1%} "
                  f"wall {r.wall_s:.1f}s", flush=True)  # fmt: skip
    print(f"\n{opts.steps} steps a peer, eval every {opts.eval_every}, sync every "
          f"{opts.sync_every}, {opts.runs} run(s), {time.monotonic() - t0:.0f} s in all\n")  # fmt: skip
    print(table(opts.rows, runs) + "\n")
    for task in ("", "_conv"):
        if any(r.row.startswith(f"torch{task}-") for r in runs):
            print(goal(runs, task=task))
    if opts.out:
        opts.out.parent.mkdir(parents=True, exist_ok=True)
        opts.out.write_text(json.dumps([asdict(r) for r in runs], indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
