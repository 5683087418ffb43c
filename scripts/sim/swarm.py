"""In-process swarm simulator: why does a gossip swarm learn less than one peer?

N `Trainer`s (the real trainer, model and optimizer code) step in lock-step in one process; every
`--period` steps each peer runs the exchange rule under test with peers picked by a seeded RNG.
No network, no timing noise: each figure is deterministic in `--seed`, so one knob at a time can
be varied (how often models are mixed, how many peers per mix, what happens to the momentum
buffer). It records, every `--eval-every` steps, each peer's own test accuracy, the accuracy of
the consensus (the mean of all models), and the consensus distance
mean_i ||x_i - mean(x)|| / ||mean(x)||.

    .venv/bin/python scripts/sim/swarm.py --data signal:2000,64,20 --model mlp:128 \
        --peers 4 --period 10 60 --rule pairwise --partition iid dirichlet:0.5

Exchange rules (`--rule`):
- `pairwise`: AD-PSGD as `--exchange average` did it: each peer in turn averages with one random
  other peer, both x <- (x + y) / 2.
- `group:K`: each peer in turn averages with K random others, all K + 1 set to their mean.
- `allreduce`: every model set to the mean of all (the synchronous ideal of the same period).
Momentum handling (`--momentum-mode`): `keep` (each peer keeps its own buffer, the code's
behaviour), `reset` (zeroed at each mix), `mix` (buffers mixed like the parameters).
The local lr (`--lr-scale none|sqrt|linear|adaptive --warmup W --scale-cap N`): x f(peers) after
a linear warm-up, as `--lr-scale` in the node (`adaptive`: each peer its own `SwarmLR`, the
node's class, fed by its trainer's half-batch probe). With `--single` each run also reports the
first evaluated step at which its worst peer reaches the single peer's accuracy (mean of its
last 3) - 1 point; `--ideal` adds one peer with a `--peers` x batch and the lr x each of
`--ideal-lr-mults` (`n`: x peers, `sqrt`: x sqrt(peers), or a number).
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from swarmnode.kernels.backend import select_backend  # noqa: E402
from swarmnode.kernels.optim import make_optimizer  # noqa: E402
from swarmnode.node.train.config import DEFAULT_LOGIT_ADJUST  # noqa: E402
from swarmnode.node.train.data.datasets import load_dataset  # noqa: E402
from swarmnode.node.train.data.label_prior import logit_offsets  # noqa: E402
from swarmnode.node.train.data.shard import all_shards, parse_partition  # noqa: E402
from swarmnode.node.train.lr.scale import SwarmLR  # noqa: E402
from swarmnode.node.train.model.builtin import build_model  # noqa: E402
from swarmnode.node.train.trainer import Trainer  # noqa: E402


def adaptive_scales(opts: argparse.Namespace, trainers: list[Trainer]) -> list[SwarmLR] | None:
    """`--lr-scale adaptive`: one node `SwarmLR` per peer, its probe on the peer's trainer."""
    if opts.lr_scale != "adaptive":
        return None
    scales = []
    for t in trainers:
        s = SwarmLR("adaptive", max_n=opts.scale_cap or opts.peers, warmup=opts.warmup)
        s.set_size(opts.peers)
        s.gain.beta = opts.gain_beta
        t.grad_probe = s.probe
        scales.append(s)
    return scales


def ideal_mults(opts: argparse.Namespace) -> list[float]:
    named = {"n": float(opts.peers), "sqrt": float(np.sqrt(opts.peers))}
    return [named[m] if m in named else float(m) for m in opts.ideal_lr_mults]


def lr_at(opts: argparse.Namespace, step: int, n: int) -> float:
    """The local lr at `step` for a swarm of n: the base lr scaled by `--lr-scale` (of n, capped
    at `--scale-cap` models), reached by a linear warm-up from the base over `--warmup` steps
    (Goyal et al. 2017)."""
    n = min(n, opts.scale_cap) if opts.scale_cap else n
    s = {"none": 1.0, "sqrt": float(np.sqrt(n)), "linear": float(n)}.get(opts.lr_scale, 1.0)
    ramp = min(1.0, step / opts.warmup) if opts.warmup else 1.0
    return opts.lr * (1.0 + (s - 1.0) * ramp)


def steps_to(curve: list[dict], target: float | None) -> int | None:
    """The first evaluated step at which the worst peer is at `target` (None: never)."""
    if target is None:
        return None
    return next((c["step"] for c in curve if min(c["accs"]) >= target), None)


def build(opts: argparse.Namespace, data: Any, idx: np.ndarray | None, batch: int) -> Trainer:
    """A peer's trainer as the node builds it, on shard `idx` (None: all of the data), with the
    node's logit adjustment on a skewed shard (`--logit-adjust`, node/train/data/label_prior.py)."""
    backend = select_backend("cpu")
    model = build_model(opts.model, data.input_shape, data.n_classes, backend, opts.seed)
    opt = make_optimizer("sgd", model.params, opts.lr, momentum=opts.momentum, weight_decay=opts.wd)
    X = data.X_train if idx is None else data.X_train[idx]
    y = data.y_train if idx is None else data.y_train[idx]
    t = Trainer(model, opt, X, y, batch, opts.seed, backend=backend)
    t.set_logit_offset(logit_offsets(y, data.y_train, data.n_classes, opts.logit_adjust))
    return t


def add_logit_adjust(p: argparse.ArgumentParser) -> None:
    p.add_argument("--logit-adjust", type=float, default=DEFAULT_LOGIT_ADJUST,
                   help="tau of the node's logit adjustment on a skewed shard (0: off)")  # fmt: skip


OUTER: dict[str, float] = {"lr": 1.0, "beta": 0.0}  # --outer-lr / --outer-momentum
_anchor: dict[int, tuple[np.ndarray, np.ndarray]] = {}  # id(trainer) -> (anchor, momentum)


def outer_step(t: Trainer) -> None:
    """DiLoCo-style outer Nesterov step on the mixed model: d = anchor - x_mixed is this
    period's consensus progress; x <- anchor - lr_out (d + beta m), m <- beta m + d."""
    x = t.model.params.data
    if id(t) not in _anchor:
        _anchor[id(t)] = (x.copy(), np.zeros_like(x))
        return
    a, m = _anchor[id(t)]
    d = a - x
    m *= OUTER["beta"]
    m += d
    x[...] = a - OUTER["lr"] * (d + OUTER["beta"] * m)
    a[...] = x


def mix_group(trainers: list[Trainer], group: Sequence[int], momentum_mode: str) -> None:
    xs = [trainers[i].model.params.data for i in group]
    mean = np.mean(xs, axis=0)
    for i in group:
        trainers[i].model.params.data[...] = mean
    if momentum_mode == "reset":
        for i in group:
            trainers[i].optimizer.velocity[...] = 0
    elif momentum_mode == "mix":
        v = np.mean([trainers[i].optimizer.velocity for i in group], axis=0)
        for i in group:
            trainers[i].optimizer.velocity[...] = v


def exchange(trainers: list[Trainer], rule: str, rng: np.random.Generator, mm: str) -> int:
    """One exchange period; returns how many model mixes (per peer, on average) it did."""
    n = len(trainers)
    if rule == "allreduce":
        mix_group(trainers, range(n), mm)
        return 1
    if rule.startswith(("pushpull:", "pull:")):
        pushpull_round(trainers, int(rule.split(":")[1]), rng, push=rule.startswith("push"))
        return 1
    k = 1 if rule == "pairwise" else int(rule.split(":")[1])
    for i in rng.permutation(n):
        others = [j for j in range(n) if j != i]
        picked = rng.choice(others, size=min(k, n - 1), replace=False)
        mix_group(trainers, [i, *picked], mm)
    return 1


def pushpull_round(
    trainers: list[Trainer], k: int, rng: np.random.Generator, push: bool = True
) -> None:
    """The node's `--exchange average --group k` protocol, one round per peer in random order:
    responders mix 1/2 of the initiator's pre-round model in, the initiator takes the mean of
    all k + 1 pre-round models and then its own outer step (others take theirs at their rounds)."""
    n = len(trainers)
    for i in rng.permutation(n):
        others = rng.choice([j for j in range(n) if j != i], size=min(k, n - 1), replace=False)
        xi = trainers[i].model.params.data
        old = {j: trainers[j].model.params.data.copy() for j in (i, *others)}
        xi[...] = np.mean([old[j] for j in (i, *others)], axis=0)
        for j in others if push else ():  # pull: the others keep their models
            xj = trainers[j].model.params.data
            xj[...] = 0.5 * old[j] + 0.5 * old[i]
        if OUTER["lr"] != 1.0 or OUTER["beta"] != 0.0:
            outer_step(trainers[i])


def consensus(trainers: list[Trainer]) -> tuple[np.ndarray, float]:
    xs = np.stack([t.model.params.data for t in trainers]).astype(np.float64)
    mean = xs.mean(axis=0)
    dist = float(np.mean(np.linalg.norm(xs - mean, axis=1)) / max(np.linalg.norm(mean), 1e-12))
    return mean, dist


def run_swarm(opts: argparse.Namespace, data: Any, partition: str, period: int, rule: str) -> dict:
    rng = np.random.default_rng(opts.seed)
    shards = all_shards(data.y_train, opts.peers, parse_partition(partition), opts.seed)
    trainers = [build(opts, data, s, opts.batch_size) for s in shards]
    _anchor.clear()
    for t in trainers:
        outer_step(t)  # the anchors start at the initial model
    scales = adaptive_scales(opts, trainers)
    curve = []
    for step in range(1, opts.steps + 1):
        lr = lr_at(opts, step - 1, opts.peers)
        for i, t in enumerate(trainers):
            t.optimizer.lr = lr if scales is None else opts.lr * scales[i].advance()
            t.step()
        if rule != "none" and step % period == 0:
            exchange(trainers, rule, rng, opts.momentum_mode)
            if (OUTER["lr"] != 1.0 or OUTER["beta"] != 0.0) and not rule.startswith(
                ("pushpull", "pull")
            ):
                for t in trainers:
                    outer_step(t)
        if step % opts.eval_every == 0 or step == opts.steps:
            accs = [t.evaluate(data.X_test, data.y_test)[1] for t in trainers]
            mean, dist = consensus(trainers)
            saved = trainers[0].model.params.data.copy()
            trainers[0].model.params.data[...] = mean
            cons_acc = trainers[0].evaluate(data.X_test, data.y_test)[1]
            trainers[0].model.params.data[...] = saved
            curve.append({"step": step, "accs": accs, "consensus_acc": cons_acc, "dist": dist})
            if scales is not None:
                curve[-1]["scales"] = [s.scale for s in scales]
    last = curve[-1]
    return {
        "partition": partition,
        "rule": rule,
        "period": period,
        "momentum_mode": opts.momentum_mode,
        "min": min(last["accs"]),
        "min3": float(np.mean([min(c["accs"]) for c in curve[-3:]])),
        "mean": float(np.mean(last["accs"])),
        "consensus": last["consensus_acc"],
        "curve": curve,
        "steps_to_target": steps_to(curve, opts.target),
    }


def run_single(opts: argparse.Namespace, data: Any, batch_mult: int, lr_mult: float) -> dict:
    lr = opts.lr
    opts.lr = lr * lr_mult
    t = build(opts, data, None, opts.batch_size * batch_mult)
    opts.lr = lr
    steps = opts.ideal_steps if batch_mult > 1 and opts.ideal_steps else opts.steps
    curve = []
    for step in range(1, steps + 1):
        t.step()
        if step % opts.eval_every == 0 or step == steps:
            curve.append({"step": step, "accs": [t.evaluate(data.X_test, data.y_test)[1]]})
    return {
        "batch_mult": batch_mult,
        "lr_mult": lr_mult,
        "acc": curve[-1]["accs"][0],
        "final3": float(np.mean([c["accs"][0] for c in curve[-3:]])),
        "curve": curve,
        "steps_to_target": steps_to(curve, opts.target),
    }


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--data", default="signal:2000,64,20")
    p.add_argument("--model", default="mlp:128")
    p.add_argument("--peers", type=int, default=4)
    p.add_argument("--steps", type=int, default=1500)
    p.add_argument("--lr", type=float, default=0.05)
    p.add_argument("--momentum", type=float, default=0.9)
    p.add_argument("--wd", type=float, default=5e-4)
    add_logit_adjust(p)
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--eval-every", type=int, default=250)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--period", type=int, nargs="+", default=[10])
    p.add_argument("--rule", nargs="*", default=["pairwise"], help="none given: no swarm runs")
    p.add_argument("--partition", nargs="+", default=["iid"])
    p.add_argument("--momentum-mode", default="keep", choices=["keep", "reset", "mix"])
    p.add_argument("--outer-lr", type=float, default=1.0)
    p.add_argument("--outer-momentum", type=float, default=0.0)
    p.add_argument("--lr-scale", default="none", choices=["none", "sqrt", "linear", "adaptive"],
                   help="local lr x f(swarm size)")  # fmt: skip
    p.add_argument("--scale-cap", type=int, default=0, help="cap on n in --lr-scale (0: none)")
    p.add_argument("--warmup", type=int, default=0, help="steps of linear lr warm-up")
    p.add_argument("--single", action="store_true", help="also the one-peer baseline (sets the "
                   "target: its mean of the last 3 evaluations - 1 point)")  # fmt: skip
    p.add_argument("--ideal", action="store_true", help="also one peer, batch x N, lr x each mult")
    p.add_argument("--ideal-lr-mults", nargs="+", default=["n"], help="n, sqrt or numbers")
    p.add_argument("--ideal-steps", type=int, default=0, help="the ideal's steps (0: --steps)")
    p.add_argument("--gain-beta", type=float, default=0.98, help="adaptive: EMA of the gain")
    p.add_argument("--curve", action="store_true", help="print the distance curve")
    p.add_argument("--json")
    opts = p.parse_args(argv)
    data = load_dataset(opts.data)
    OUTER.update(lr=opts.outer_lr, beta=opts.outer_momentum)
    out: dict[str, Any] = {"options": vars(opts), "runs": []}
    opts.target = None
    if opts.single:
        s = run_single(opts, data, 1, 1.0)
        opts.target = s["final3"] - 0.01
        s["steps_to_target"] = steps_to(s["curve"], opts.target)
        out["single"] = s
        print(f"single peer, all data: {s['acc'] * 100:.1f}% (last 3: {s['final3'] * 100:.1f}), "
              f"target at step {s['steps_to_target']}", flush=True)  # fmt: skip
    for mult in ideal_mults(opts) if opts.ideal else ():
        s = run_single(opts, data, opts.peers, mult)
        out.setdefault("ideal", []).append(s)
        print(f"ideal-{opts.peers} lr x{mult:g}: {s['acc'] * 100:.1f}% (last 3 "
              f"{s['final3'] * 100:.1f}), target at step {s['steps_to_target']}", flush=True)  # fmt: skip
    for part, period, rule in itertools.product(opts.partition, opts.period, opts.rule):
        r = run_swarm(opts, data, part, period, rule)
        out["runs"].append(r)
        print(
            f"{part:14} {rule:10} every {period:3} mom={opts.momentum_mode} "
            f"outer={opts.outer_lr:g}/{opts.outer_momentum:g}: "
            f"min {r['min'] * 100:5.1f} (last 3 {r['min3'] * 100:5.1f})  mean {r['mean'] * 100:5.1f}  "
            f"consensus {r['consensus'] * 100:5.1f}  dist {r['curve'][-1]['dist']:.3f}  "
            f"lr {opts.lr_scale}/w{opts.warmup}  target at {r['steps_to_target']}",
            flush=True,
        )
        if opts.curve:
            print("   dist: " + " ".join(f"{c['dist']:.3f}" for c in r["curve"]))
            print("   min acc: " + " ".join(f"{min(c['accs']) * 100:.0f}" for c in r["curve"]))
            if "scales" in r["curve"][0]:
                print("   lr scale: " + " ".join(f"{np.mean(c['scales']):.1f}" for c in r["curve"]))
    if opts.json:
        Path(opts.json).write_text(json.dumps(out, indent=1, default=float))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
