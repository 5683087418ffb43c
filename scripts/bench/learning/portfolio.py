"""The learning portfolio on real `swarmnode start` processes (issue 21): per task, partition and
pace, one peer, the synchronous ideal at lr x {1, 2, N}, and swarms of 4 and 8 peers per mode.

Tasks (`--tasks`, defined in scripts/bench/learning/portfolio_sim.py, which screens the same ones in
the lock-step simulator): `overfit` (one peer overfits a quarter of the data), `plentiful` (one peer
sees less than one pass), `conv` (a 1-D conv net), `digits` and `source` (each peer a different
source: its block of the train set sorted by a feature, written to a file of its own under
`--out`/sources and loaded as the peer's `--data`, with no `--shard`). Paces (`--paces`): `full`
(released at full speed) and `paced` (every step at least `--step-time` s, a compute-bound peer).
Modes (`--modes`): those of scripts/bench/learning/convergence.py, plus `average-unbounded` /
`robust-unbounded` (`--max-lead 0`: the exchange before the bounded staleness, i.e. the old code's
pacing), so old and new run side by side in one run, and `average-lead1` / `robust-lead1`
(`--max-lead 1`, the tighter bound), and `average-nobounds` / `robust-nobounds` (`--push-budget
off`: without issue 22's bounds on a hostile insider), and `average-sqrt`, `average-cosine`,
`average-sqrt-cosine` (the lr rules of issue 30; also robust-), and `average-topk2` /
`average-lowrank` (`--compress topk2:0.07` / `lowrank:8`). Each row also gives the late-window means
(each peer's mean over its evaluations in the last sixth of the steps: the worst and the mean peer,
and the worst's gap to one peer's).

Per (task, partition, pace) it writes a table like scripts/bench/learning/convergence.py's (worst /
mean peer, time to one peer's final - 1 point, x single, and here also x the best ideal: the ideal
at whichever lr reaches that target first; and the swarm's compute utilization), and one plot of the
worst peer's accuracy against wall time. The ideal's time is its steps x one peer's step time (N
workers of batch B and an all-reduce that costs nothing).

    .venv/bin/python scripts/bench/learning/portfolio.py --tasks overfit --paces full,paced \
        --partitions iid,dirichlet:0.5 --peers 4,8 --out runs/portfolio
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))  # scripts.* by full name

from swarmnode.node.train.data import load_dataset

from scripts.bench.learning import convergence as bc
from scripts.bench.learning.convergence_report import RunResult, figures, plot
from scripts.bench.learning.portfolio_sim import FEATURE, TASKS, feature_shards

# the same modes with the step limit off: the exchange as it was before issue 21
for _mode in ("average", "robust"):
    bc.MODES[f"{_mode}-unbounded"] = [*bc.MODES[_mode], "--max-lead", "0"]
    bc.MODES[f"{_mode}-lead1"] = [*bc.MODES[_mode], "--max-lead", "1"]  # the tighter bound
    bc.MODES[f"{_mode}-nobounds"] = [*bc.MODES[_mode], "--push-budget", "off"]  # before issue 22
    # the lr rules of issue 30's table: x sqrt N, each also under a cosine decay
    bc.MODES[f"{_mode}-sqrt"] = [*bc.MODES[_mode], "--lr-scale", "sqrt"]
    bc.MODES[f"{_mode}-cosine"] = [*bc.MODES[_mode], "--lr-schedule", "cosine"]
    bc.MODES[f"{_mode}-sqrt-cosine"] = [*bc.MODES[f"{_mode}-sqrt"], "--lr-schedule", "cosine"]
# compressed push-pulls (average mode only): 2-bit chunked top-k, and low rank to compare
bc.MODES["average-topk2"] = [*bc.MODES["average"], "--compress", "topk2:0.07"]
bc.MODES["average-lowrank"] = [*bc.MODES["average"], "--compress", "lowrank:8"]

PACED_STEP_S = {"overfit": 0.01, "plentiful": 0.02, "conv": 0.02, "digits": 0.01, "source": 0.01}


def node_partition(partition: str) -> str:
    """What the node's `--partition` reads: `feature` shards are files of their own (below)."""
    return "iid" if partition == FEATURE else partition


def source_files(opts: argparse.Namespace, n: int) -> list[Path]:
    """Each peer's own data file for the `feature` partition (portfolio_sim.feature_shards):
    its block of the train set and the whole test set, as a user's `.npz` (a peer on its own
    file takes no `--shard` and knows no whole-set prior: no logit adjustment, as a real
    source)."""
    folder = Path(opts.sources_dir) / f"{opts.data.replace(':', '_').replace(',', '_')}-{n}"
    files = [folder / f"peer{i}.npz" for i in range(n)]
    if all(f.exists() for f in files):
        return files
    folder.mkdir(parents=True, exist_ok=True)
    data = load_dataset(opts.data)
    for f, idx in zip(files, feature_shards(data.X_train, n), strict=True):
        arrays = {"X_train": data.X_train[idx], "y_train": data.y_train[idx],
                  "X_test": data.X_test, "y_test": data.y_test}  # fmt: skip
        np.savez(f, **arrays)
    return files


def own_sources(per_peer: list[list[str]], files: list[Path]) -> list[list[str]]:
    """`swarm_args`' peers, each on its own file: `--data` replaced, `--shard i/N` dropped."""
    out = []
    for args, f in zip(per_peer, files, strict=True):
        args = list(args)
        args[args.index("--data") + 1] = str(f)
        at = args.index("--shard")
        del args[at : at + 2]
        out.append(args)
    return out


def peers_args(opts: argparse.Namespace, partition: str, n: int, mode: str) -> list[list[str]]:
    per = bc.swarm_args(opts, node_partition(partition), n, mode)
    return own_sources(per, source_files(opts, n)) if partition == FEATURE else per


def task_opts(opts: argparse.Namespace, name: str, pace: str) -> argparse.Namespace:
    """scripts/bench/learning/convergence.py's options for one task at one pace."""
    t = TASKS[name]
    args = ["--data", t.data, "--model", t.model, "--steps", str(t.steps), "--lr", f"{t.lr:g}",
            "--weight-decay", f"{t.wd:g}", "--eval-every", str(t.eval_every),
            "--peers", opts.peers, "--modes", opts.modes, "--attacks", opts.attacks,
            "--attack-partitions", opts.attack_partitions,
            "--ideal-lr-mults", "1,2,n", "--timeout", str(opts.timeout),
            "--step-time", "0" if pace == "full" else f"{PACED_STEP_S[name]:g}",
            "--slowdown", "1"]  # fmt: skip
    topts = bc.parse_args(args)
    topts.sources_dir = str(Path(opts.out) / "sources")  # the `feature` partition's files
    return topts


def run_ideals(opts: argparse.Namespace, partition: str, n: int) -> list[RunResult]:
    out = []
    for mult in ("1", "2", "n"):
        lr = opts.lr * (n if mult == "n" else float(mult))
        args = bc.base_args(opts, partition, n * opts.batch_size, lr)
        r = bc.run(f"ideal-{n}-x{mult}", partition, [args], opts, None)
        r.note = f"batch {n * opts.batch_size}, lr {lr:g}"
        out.append(r)
    return out


def run_block(opts: argparse.Namespace, partition: str) -> list[RunResult]:
    """convergence.py's run_partition, but every ideal kept (the best is picked by time)."""
    say = lambda s: print(f"  [{partition}] {s}", flush=True)  # noqa: E731
    single_args = bc.base_args(opts, node_partition(partition), opts.batch_size, opts.lr)
    results = [bc.run("single", partition, [single_args], opts, opts.slowdown)]
    say(f"single: {results[0].worst:.1%}")
    for n in opts.peers:
        results += run_ideals(opts, node_partition(partition), n)
        for mode in opts.modes:
            r = bc.run(f"swarm-{n}-{mode}", partition, peers_args(opts, partition, n, mode),
                       opts, opts.slowdown)  # fmt: skip
            say(f"swarm-{n}-{mode}: worst {r.worst:.1%}, mean {r.mean:.1%}")
            results.append(r)
    if partition in opts.attack_partitions:
        for mode in opts.attack_modes:
            results.append(
                bc.run(
                    f"clean-{mode}-5",
                    partition,
                    peers_args(opts, partition, 5, mode),
                    opts,
                    opts.slowdown,
                )
            )
            for attack in opts.attacks:
                per = peers_args(opts, partition, 5, mode)
                per[4] = [*per[4], "--byzantine", attack]
                results.append(
                    bc.run(f"attack-{attack}-{mode}", partition, per, opts, opts.slowdown, 4)
                )
    return results


def add_columns(rows: list[dict[str, Any]], results: list[RunResult], steps: int) -> None:
    """x the best ideal of the same N (by time to target), and the compute utilization."""
    best: dict[str, float] = {}
    for row in rows:
        if row["run"].startswith("ideal-") and row["time_to_target_worst_s"] is not None:
            n = row["run"].split("-")[1]
            best[n] = min(best.get(n, math.inf), row["time_to_target_worst_s"])
    for row, r in zip(rows, results, strict=True):
        n = row["run"].split("-")[1] if row["run"].startswith("swarm-") else None
        t = row["time_to_target_worst_s"]
        row["time_vs_ideal"] = t / best[n] if n in best and t is not None else None
        utils = [p.summary.get("utilization") for p in r.honest]
        row["utilization"] = min(u for u in utils if u is not None) if any(utils) else None
        lates = [late_mean(p.evals, steps) for p in r.honest]
        row["late_worst"], row["late_mean"] = min(lates), float(np.mean(lates))
    for row in rows:  # issue 30's accuracy: each side's late-window mean
        row["late_gap"] = row["late_worst"] - rows[0]["late_worst"]


def late_mean(evals: Sequence[tuple[int, float]], steps: int) -> float:
    """A peer's mean over its evaluations in the last sixth of `steps` (its last one if none)."""
    window = [a for s, a in evals if s > steps - steps / 6]
    return float(np.mean(window or [evals[-1][1]])) if evals else 0.0


def table(title: str, rows: list[dict[str, Any]], target: float) -> str:
    out = [f"\n#### {title} (target: one peer - 1 point = {target * 100:.1f}%)\n",
           "| run | worst / mean | worst - one peer | late worst / mean | late worst - one peer | "
           "time to target (worst) | x one peer | x best ideal | steps / exchange | "
           "utilization (lowest) |",
           "|---|---|---|---|---|---|---|---|---|---|"]  # fmt: skip
    for r in rows:
        t, x, xi = r["time_to_target_worst_s"], r["time_vs_single"], r["time_vs_ideal"]
        spe, u = r["steps_per_exchange"], r["utilization"]
        name = r["run"] + (f" ({r['note']})" if r["note"] else "")
        out.append(
            f"| {name} | {r['worst'] * 100:.1f} / {r['mean'] * 100:.1f}% | "
            f"{r['worst_minus_single'] * 100:+.1f} | {r['late_worst'] * 100:.1f} / "
            f"{r['late_mean'] * 100:.1f}% | {r['late_gap'] * 100:+.1f} | "
            f"{'-' if t is None else f'{t:.1f} s'} | "
            f"{'-' if x is None else f'{x:.2f}'} | {'-' if xi is None else f'{xi:.2f}'} | "
            f"{'-' if spe is None else f'{spe:.0f}'} | {'-' if u is None else f'{u:.0%}'} |"
        )
    return "\n".join(out)


def distinct_colours() -> None:
    """20 colours, not matplotlib's 10: a plot holds up to 15 lines, and two alike misled."""
    import matplotlib

    matplotlib.rcParams["axes.prop_cycle"] = matplotlib.cycler(
        color=matplotlib.colormaps["tab20"].colors
    )


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--tasks", default=",".join(TASKS), help=f"of {', '.join(TASKS)}")
    p.add_argument("--paces", default="full,paced")
    p.add_argument("--partitions", default="iid,dirichlet:0.5")
    p.add_argument("--peers", default="4,8")
    p.add_argument("--modes", default="average-unbounded,average,robust")
    p.add_argument("--attacks", default="", help="e.g. alie:30,ipm:10 (robust, 1 of 5)")
    p.add_argument("--attack-partitions", default="dirichlet:0.5")
    p.add_argument("--timeout", type=float, default=300.0, help="per run, seconds")
    p.add_argument("--out", default="runs/portfolio")
    opts = p.parse_args(argv)
    out = Path(opts.out)
    out.mkdir(parents=True, exist_ok=True)
    distinct_colours()
    md = [f"`{' '.join(sys.argv)}`"]
    report: dict[str, Any] = {}
    for task in opts.tasks.split(","):
        for pace in opts.paces.split(","):
            topts = task_opts(opts, task, pace)
            key = f"{task}-{pace}"
            print(f"{key}: {topts.data} {topts.model}, {topts.steps} steps", flush=True)
            results: dict[str, list[RunResult]] = {}
            section: dict[str, Any] = {"options": vars(topts), "partitions": {}}
            for partition in TASKS[task].partitions or opts.partitions.split(","):
                rs = run_block(topts, partition)
                results[partition] = rs
                rows = figures(rs)
                add_columns(rows, rs, topts.steps)
                target = rs[0].worst - 0.01
                section["partitions"][partition] = {
                    "target": target,
                    "rows": rows,
                    "curves": {r.name: {q.name: q.evals for q in r.peers} for r in rs},
                }
                md.append(table(f"{key}, {partition}", rows, target))
                print(md[-1], flush=True)
                (out / "report.md").write_text("\n".join(md) + "\n")
            report[key] = section
            (out / "report.json").write_text(json.dumps(report, indent=1, default=float))
            plot(section, results, out / f"{key}.png")
    print(f"\nwrote {out}/report.md, report.json and one plot per task and pace")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
