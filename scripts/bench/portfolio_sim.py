"""The learning portfolio in the lock-step simulator: screen exchange candidates on four tasks.

Same tasks as scripts/bench/portfolio.py (real processes), same trainer, model, optimizer, sharding,
logit adjustment and outer step code as the node (`node.train.mixing.mixes.OuterStep`), but in one
process and in lock-step: every peer takes one step, then every `--period` steps each peer in turn
runs the node's `--exchange average --group 3` round (push its model to 3 random others, which mix
half of it in; take the mean of all 4; then its outer step). No network and no timing noise, so
candidates differ only by the rule; `--stale P` rounds every P steps stand for a peer at full speed
held at its step limit (`--max-lead 2` x `--sync-every 10` = 20).

Per task: one peer on all the data (`single`; target = its last-3 mean - 1 point), the
synchronous ideal (one peer, N x the batch, lr x 1, 2 and N; the best reaches the target first),
and for each candidate, swarm size and partition the worst peer's final accuracy (mean of the
last 3 evaluations) and its steps to the target, as a ratio to the best ideal's steps (time:
lock-step, so a step is a unit of time for all of them).

The lr schedule is a dimension of its own (`--lr-schedule constant,cosine`: the node's
`--lr-schedule`, with `--lr-warmup` and `--lr-floor` as in the node, the decay ending at the
task's last step), applied alike to the one peer, the ideal and the swarm, on their step
counters (node/train/lr/schedule.py, through the node's `Trainer`); lr = --lr x the candidate's
local scale x the schedule. Each row also gives the late-window means: each peer's mean over its
evaluations in the last sixth of the steps, the worst and the mean over peers (and one peer's),
which is how the goals of issue 30 read accuracy (`--eval-every` makes that window hold more
than a couple of evaluations; `--steps` shortens every task).

Candidates (`--candidates`): `current` (outer lr 0.7, momentum 0.5), `diloco` (0.7, 0.9),
`gainN` (momentum 0.9, outer lr 0.1 x N: a stationary gain lr / (1 - beta) = N, the number of
peers), `gainsqrt` (gain sqrt(N)), `halfN` (gain N / 2), `plain` (no outer step: 1, 0), each
optionally with `+wW` (the gain rises linearly from 1.4 over W steps) and `+lrsqrt` / `+lrN`
(the local lr x sqrt(N) / x N, rising over `--lr-warmup` steps: the node's `--lr-scale
sqrt|linear`).

    .venv/bin/python scripts/bench/portfolio_sim.py --tasks overfit,digits --peers 4,8 \
        --candidates current,gainN,halfN --json runs/screen.json
    .venv/bin/python scripts/bench/portfolio_sim.py --tasks digits --peers 4 \
        --candidates current --lr-schedule constant,cosine --eval-every 25
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from swarmnode.kernels.backend import select_backend  # noqa: E402
from swarmnode.kernels.optim import make_optimizer  # noqa: E402
from swarmnode.node.train.config import DEFAULT_LOGIT_ADJUST, DEFAULT_LR_WARMUP  # noqa: E402
from swarmnode.node.train.data.datasets import load_dataset  # noqa: E402
from swarmnode.node.train.data.label_prior import logit_offsets  # noqa: E402
from swarmnode.node.train.data.shard import all_shards, parse_partition  # noqa: E402
from swarmnode.node.train.lr.schedule import DEFAULT_FLOOR, LRSchedule  # noqa: E402
from swarmnode.node.train.mixing.mixes import OuterStep  # noqa: E402
from swarmnode.node.train.model.builtin import build_model  # noqa: E402
from swarmnode.node.train.trainer import Trainer  # noqa: E402


@dataclass(frozen=True)
class Task:
    """One portfolio task: data, model, steps per peer, lr, weight decay, evaluation period."""

    data: str
    model: str
    steps: int
    lr: float = 0.05
    wd: float = 5e-4
    eval_every: int = 100
    why: str = ""


# Ours, not the held-out ones of issue 21 (those stay out of every tuning loop).
TASKS = {
    "overfit": Task("signal:2000,64,20", "mlp:128", 1500, why="one peer overfits a quarter"),
    "plentiful": Task(
        "signal:40000,64,32", "mlp:128", 1000, why="one peer sees 32k of 40k samples: < 1 pass"
    ),
    "conv": Task("signal:2000,64,20", "cnn1d:8k5,p2,16k3,p2,32", 1500, why="a conv net"),
    "digits": Task("digits", "mlp:64", 1000, why="the bundled 8x8 digits"),
}
BASE_GAIN = 0.7 / (1 - 0.5)  # the current default's stationary gain, where a warm-up starts


@dataclass(frozen=True)
class Candidate:
    name: str
    gain: str  # current | diloco | N | sqrt | half | a number: the outer step's stationary gain
    warmup: int = 0  # steps over which the gain rises from BASE_GAIN
    lr_rule: str = "none"  # the local lr x sqrt(N) or x N too (--lr-scale, over --lr-warmup)

    def outer(self, n: int, step: int) -> tuple[float, float]:
        """(outer lr, outer momentum) at `step` in a swarm of n."""
        if self.gain == "current":
            return 0.7, 0.5
        if self.gain == "diloco":
            return 0.7, 0.9
        if self.gain == "plain":
            return 1.0, 0.0
        target = {"N": n, "sqrt": math.sqrt(n), "half": n / 2}.get(self.gain)
        g = float(self.gain) if target is None else float(target)
        g = max(g, BASE_GAIN)
        if self.warmup:
            g = BASE_GAIN + (g - BASE_GAIN) * min(1.0, step / self.warmup)
        beta = 0.9
        return g * (1 - beta), beta


def parse_candidate(text: str) -> Candidate:
    head, *mods = text.split("+")
    gain = {"current": "current", "diloco": "diloco", "gainN": "N", "gainsqrt": "sqrt"}.get(head)
    gain = gain or {"halfN": "half"}.get(head) or head.removeprefix("gain")
    warm = next((int(m[1:]) for m in mods if m.startswith("w")), 0)
    lr_rule = "sqrt" if "lrsqrt" in mods else "linear" if "lrN" in mods else "none"
    return Candidate(text, gain, warm, lr_rule)


def build(
    task: Task,
    data: Any,
    idx: np.ndarray | None,
    batch: int,
    lr: float,
    seed: int,
    schedule: LRSchedule,
) -> Trainer:
    backend = select_backend("cpu")
    model = build_model(task.model, data.input_shape, data.n_classes, backend, seed)
    opt = make_optimizer("sgd", model.params, lr, momentum=0.9, weight_decay=task.wd)
    X = data.X_train if idx is None else data.X_train[idx]
    y = data.y_train if idx is None else data.y_train[idx]
    t = Trainer(model, opt, X, y, batch, seed, backend=backend)
    t.set_logit_offset(logit_offsets(y, data.y_train, data.n_classes, DEFAULT_LOGIT_ADJUST))
    t.lr_schedule = schedule  # the node's: lr = peak x t.lr_scale x schedule(step counter)
    return t


def first_at(curve: list[tuple[int, float]], target: float) -> int | None:
    return next((s for s, a in curve if a >= target), None)


def last3(curve: list[tuple[int, float]]) -> float:
    return float(np.mean([a for _, a in curve[-3:]]))


def late(curve: list[tuple[int, float]], steps: int) -> float:
    """The late-window mean: over the evaluations in the last sixth of the `steps`."""
    return float(np.mean([a for s, a in curve if s > steps - steps / 6] or [curve[-1][1]]))


def schedule_of(task: Task, kind: str, opts: argparse.Namespace) -> LRSchedule:
    """The node's `--lr-schedule KIND` for `task`: the decay ends at its last step."""
    return LRSchedule(kind, opts.lr_warmup, task.steps, opts.lr_floor)


def run_single(
    task: Task, data: Any, batch_mult: int, lr_mult: float, seed: int, schedule: LRSchedule
) -> list:
    t = build(task, data, None, 32 * batch_mult, task.lr * lr_mult, seed, schedule)
    curve = []
    for step in range(1, task.steps + 1):
        t.step()
        if step % task.eval_every == 0:
            curve.append((step, t.evaluate(data.X_test, data.y_test)[1]))
    return curve


def run_swarm(
    task: Task,
    data: Any,
    n: int,
    partition: str,
    cand: Candidate,
    period: int,
    seed: int,
    schedule: LRSchedule,
) -> tuple[list[tuple[int, float]], list[list[tuple[int, float]]]]:
    """The worst peer's accuracy curve (the lowest at each evaluation), and each peer's."""
    rng = np.random.default_rng(seed)
    shards = all_shards(data.y_train, n, parse_partition(partition), seed)
    lr_mult = {"sqrt": math.sqrt(n), "linear": float(n)}.get(cand.lr_rule, 1.0)
    trainers = [build(task, data, s, 32, task.lr, seed, schedule) for s in shards]
    outers = [OuterStep(np) for _ in trainers]
    for t, o in zip(trainers, outers, strict=True):
        o.apply(t.model.params.data, 1.0, 0.0)  # the anchor: the start model
    curve: list[tuple[int, float]] = []
    peers: list[list[tuple[int, float]]] = [[] for _ in trainers]
    warmup = schedule.warmup
    for step in range(1, task.steps + 1):
        ramp = min(1.0, step / warmup) if warmup else 1.0  # the node's SwarmLR, same warm-up
        for t in trainers:
            t.lr_scale = 1 + (lr_mult - 1) * ramp
            t.step()
        if step % period == 0:
            lr_o, beta = cand.outer(n, step)
            for i in rng.permutation(n):  # the node's group push-pull, then i's outer step
                others = rng.choice(
                    [j for j in range(n) if j != i], size=min(3, n - 1), replace=False
                )
                old = {j: trainers[j].model.params.data.copy() for j in (i, *others)}
                trainers[i].model.params.data[...] = np.mean(list(old.values()), axis=0)
                for j in others:
                    trainers[j].model.params.data[...] = 0.5 * old[j] + 0.5 * old[i]
                outers[i].apply(trainers[i].model.params.data, lr_o, beta)
        if step % task.eval_every == 0:
            accs = [t.evaluate(data.X_test, data.y_test)[1] for t in trainers]
            if not all(np.isfinite(t.model.params.data).all() for t in trainers):
                accs = [0.0]
            curve.append((step, min(accs)))
            for mine, acc in zip(peers, accs if len(accs) == n else [0.0] * n, strict=True):
                mine.append((step, acc))
    return curve, peers


def screen_task(name: str, opts: argparse.Namespace) -> list[dict[str, Any]]:
    """One block of results per lr schedule: one peer, the ideals and the rows, all on it."""
    task = TASKS[name]
    task = replace(
        task, steps=opts.steps or task.steps, eval_every=opts.eval_every or task.eval_every
    )
    data = load_dataset(task.data)
    return [screen_schedule(name, task, data, kind, opts) for kind in opts.lr_schedules]


def screen_schedule(
    name: str, task: Task, data: Any, kind: str, opts: argparse.Namespace
) -> dict[str, Any]:
    schedule = schedule_of(task, kind, opts)
    tag = f"{name}/{kind}"
    single = run_single(task, data, 1, 1.0, opts.seed, schedule)
    target = last3(single) - 0.01
    out: dict[str, Any] = {"task": name, "schedule": str(schedule), "single": last3(single),
                           "single_late": late(single, task.steps), "target": target,
                           "rows": []}  # fmt: skip
    print(f"[{tag}] {task.data} {task.model}, lr {schedule}: one peer {last3(single):.1%} "
          f"(late {out['single_late']:.1%}), target {target:.1%} at step "
          f"{first_at(single, target)}", flush=True)  # fmt: skip
    for n in opts.peers:
        ideals = {}
        for mult in [float(n) if m == "n" else float(m) for m in opts.ideal_mults if m]:
            c = run_single(task, data, n, mult, opts.seed, schedule)
            ideals[mult] = (last3(c), first_at(c, target))
        reach = [s for _, s in ideals.values() if s is not None]
        best = min(reach) if reach else None
        desc = ", ".join(f"lr x{m:g}: {a:.1%} at {s}" for m, (a, s) in ideals.items())
        print(f"[{tag}] ideal-{n}: {desc}", flush=True)
        out.setdefault("ideal", {})[n] = {"by_mult": ideals, "best_steps": best}
        for part, cand_text, period in itertools.product(
            opts.partitions, opts.candidates, opts.periods
        ):
            cand = parse_candidate(cand_text)
            t0 = time.perf_counter()
            c, peers = run_swarm(task, data, n, part, cand, period, opts.seed, schedule)
            s = first_at(c, target)
            lates = [late(p, task.steps) for p in peers]
            row = {"n": n, "partition": part, "candidate": cand_text, "period": period,
                   "schedule": kind, "worst": last3(c), "gap": last3(c) - out["single"],
                   "late_worst": min(lates), "late_mean": float(np.mean(lates)),
                   "late_gap": min(lates) - out["single_late"], "steps": s,
                   "vs_ideal": s / best if s and best else None}  # fmt: skip
            out["rows"].append(row)
            ratio = "-" if row["vs_ideal"] is None else f"{row['vs_ideal']:.2f}x"
            print(f"[{tag}] {n} peers {part:13} {cand_text:16} every {period:2}: worst "
                  f"{row['worst']:.1%} ({row['gap'] * 100:+.1f}), late worst "
                  f"{row['late_worst']:.1%} ({row['late_gap'] * 100:+.1f}) mean "
                  f"{row['late_mean']:.1%}; target at {s} = {ratio} ideal "
                  f"({time.perf_counter() - t0:.0f}s)", flush=True)  # fmt: skip
    return out


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--tasks", default=",".join(TASKS), help=f"of {', '.join(TASKS)}")
    p.add_argument("--peers", default="4,8")
    p.add_argument("--partitions", default="iid,dirichlet:0.5")
    p.add_argument("--candidates", default="current,gainN+w300")
    p.add_argument("--periods", default="10", help="steps between rounds (20: the stale bound)")
    p.add_argument("--ideal-mults", default="1,2,n", help="the ideal's lr x (empty: no ideal)")
    p.add_argument(
        "--lr-schedule",
        dest="lr_schedules",
        default="constant",
        help="lr schedules to weigh, e.g. constant,cosine (the node's --lr-schedule)",
    )
    p.add_argument(
        "--lr-warmup",
        type=int,
        default=DEFAULT_LR_WARMUP,
        help="the schedule's warm-up and the local scale's ramp, as in the node",
    )
    p.add_argument(
        "--lr-floor",
        type=float,
        default=DEFAULT_FLOOR,
        help="cosine/linear: the last lr, a fraction of the task's lr",
    )
    p.add_argument("--steps", type=int, default=0, help="steps per peer (0: the task's)")
    p.add_argument("--eval-every", type=int, default=0, help="(0: the task's)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--json", help="write the rows here")
    opts = p.parse_args(argv)
    opts.peers = [int(x) for x in opts.peers.split(",")]
    opts.partitions = opts.partitions.split(",")
    opts.candidates = opts.candidates.split(",")
    opts.periods = [int(x) for x in opts.periods.split(",")]
    opts.ideal_mults = opts.ideal_mults.split(",")
    opts.lr_schedules = opts.lr_schedules.split(",")
    for c in opts.candidates:
        parse_candidate(c).outer(4, 0)  # a bad name fails here, not an hour in
    for t, kind in itertools.product(opts.tasks.split(","), opts.lr_schedules):
        schedule_of(replace(TASKS[t], steps=opts.steps or TASKS[t].steps), kind, opts)  # ditto
    results = [block for t in opts.tasks.split(",") for block in screen_task(t, opts)]
    if opts.json:
        Path(opts.json).parent.mkdir(parents=True, exist_ok=True)
        Path(opts.json).write_text(json.dumps(results, indent=1, default=float))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
