"""In-process swarm simulator for compressed gossip: what does each codec buy per byte?

N `Trainer`s (the real trainer, model and optimizer code) step in lock-step; every `--period`
steps each peer in turn runs a round with `--group` random others, exchanging *compressed
differences against per-pair references* with error feedback, as gossip/exchange/refs.py does: peer i
sends C(x_i - s_ij), where s_ij is what j holds of i, and both sides add C(...) to it; then the
pair takes CHOCO's gossip step d = w (c_j - c_i) on the copies (w = 1 / (group + 1)), x_i += d,
x_j -= d, and both copies move by d too (the node's bookkeeping: the step never lands in the
residual). No network and no timing: each figure is deterministic in `--seed`, so the codecs are
compared on learning per round and bytes per round alone.

Codecs (`--codecs`): `exact` (the copies are the models: an uncompressed round), `fp16`,
`int8`, `topk:RATIO`, `topk2:DENSITY`, `lowrank:R` (kernels/compress.py and kernels/lowrank.py, the node's own:
lowrank with a warm start per pair direction, as gossip.exchange.refs keeps it). Bytes are what a
frame's payload takes.

    .venv/bin/python scripts/sim/codecs.py --data signal:4000,64,20 --model mlp:2048,2400 \\
        --partition dirichlet:0.5 --steps 300 --codecs exact int8 topk:0.01 lowrank:8
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from swarmnode.kernels import compress, lowrank  # noqa: E402
from swarmnode.node.peer.state_sync import param_segments  # noqa: E402
from swarmnode.node.train.data.datasets import load_dataset  # noqa: E402
from swarmnode.node.train.data.shard import all_shards, parse_partition  # noqa: E402

from scripts.sim import swarm as sim_swarm  # noqa: E402


def codec_fn(spec: str, segs: lowrank.Segs) -> Any:
    """A function residual -> (what the receiver adds, payload bytes)."""
    if spec == "exact":
        return lambda x: (x.copy(), 4 * x.size)
    name, ratio = compress.parse_codec(spec)
    warm: dict[
        int, Any
    ] = {}  # lowrank: this direction's warm start, as gossip.exchange.refs keeps it

    def fn(x: np.ndarray) -> tuple[np.ndarray, int]:
        packed = compress.encode(x, name, ratio, segs=segs, warm=warm)
        return compress.decode(packed), packed.nbytes

    return fn


class Pair:
    """One pair's shared state: each side's copy of the other, and each direction's codec."""

    def __init__(self, x_i: np.ndarray, x_j: np.ndarray, make: Any) -> None:
        self.c = {0: x_i.copy(), 1: x_j.copy()}  # the shared start: both copies at x0
        self.codec = {0: make(), 1: make()}

    def round(self, x: dict[int, np.ndarray], w: float) -> int:
        sent = 0
        for side in (0, 1):
            delta, nbytes = self.codec[side](x[side] - self.c[side])
            self.c[side] += delta
            sent += nbytes
        d = w * (self.c[1] - self.c[0])
        x[0] += d
        x[1] -= d
        self.c[0] += d
        self.c[1] -= d
        return sent


def run(opts: argparse.Namespace, data: Any, partition: str, spec: str) -> dict[str, Any]:
    rng = np.random.default_rng(opts.seed)
    shards = all_shards(data.y_train, opts.peers, parse_partition(partition), opts.seed)
    trainers = [sim_swarm.build(opts, data, s, opts.batch_size) for s in shards]
    segs = param_segments(trainers[0])  # the node's own segments of the model
    xs = [t.model.params.data for t in trainers]
    pairs: dict[tuple[int, int], Pair] = {}
    sent = np.zeros(opts.peers)
    curve, codec_s = [], 0.0
    for step in range(1, opts.steps + 1):
        for t in trainers:
            t.step()
        if opts.period and step % opts.period == 0:
            for i in rng.permutation(opts.peers):
                others = [j for j in range(opts.peers) if j != i]
                group = rng.choice(others, size=min(opts.group, len(others)), replace=False)
                for j in group:
                    key = (min(i, j), max(i, j))
                    if key not in pairs:
                        pairs[key] = Pair(xs[key[0]], xs[key[1]], lambda: codec_fn(spec, segs))
                    t0 = time.perf_counter()
                    nbytes = pairs[key].round({0: xs[key[0]], 1: xs[key[1]]}, 1 / (opts.group + 1))
                    codec_s += time.perf_counter() - t0
                    sent[list(key)] += nbytes / 2  # each side sent its own frame
        if step % opts.eval_every == 0 or step == opts.steps:
            accs = [t.evaluate(data.X_test, data.y_test)[1] for t in trainers]
            curve.append({"step": step, "accs": accs, "mb_per_peer": float(sent.mean() / 1e6)})
    last3 = [float(np.mean(c["accs"])) for c in curve[-3:]]
    late = [c["accs"] for c in curve if c["step"] > opts.steps - opts.steps / 6]
    return {
        "codec": spec,
        "partition": partition,
        "mean_last3": float(np.mean(last3)),
        "min_last": min(curve[-1]["accs"]),
        # each peer's mean over the evaluations of the last sixth; the worst peer's
        "late_worst": float(np.mean(late, axis=0).min()),
        "mb_per_peer": float(sent.mean() / 1e6),
        "codec_s": codec_s,
        "curve": curve,
    }


def first_at(curve: list[dict[str, Any]], target: float, k: int = 3) -> int | None:
    """First evaluated step whose mean accuracy, averaged over the last k evaluations, >= target."""
    means = [float(np.mean(c["accs"])) for c in curve]
    for i in range(len(curve)):
        if np.mean(means[max(0, i - k + 1) : i + 1]) >= target:
            return curve[i]["step"]
    return None


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--data", default="signal:4000,64,20")
    p.add_argument("--model", default="mlp:2048,2400")
    p.add_argument("--peers", type=int, default=4)
    p.add_argument("--group", type=int, default=3, help="partners per round")
    p.add_argument("--steps", type=int, default=300)
    p.add_argument("--period", type=int, default=10, help="steps between rounds (0: never)")
    p.add_argument("--lr", type=float, default=0.05)
    p.add_argument("--momentum", type=float, default=0.9)
    p.add_argument("--wd", type=float, default=5e-4)
    sim_swarm.add_logit_adjust(p)
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--eval-every", type=int, default=25)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--partition", nargs="+", default=["dirichlet:0.5"])
    p.add_argument("--codecs", nargs="+", default=["exact", "int8", "topk:0.01", "lowrank:8"])
    p.add_argument("--json", help="write every run, curves included, here")
    opts = p.parse_args(argv)
    data = load_dataset(opts.data)
    runs = []
    for partition in opts.partition:
        for spec in opts.codecs:
            r = run(opts, data, partition, spec)
            runs.append(r)
            ref = runs[0] if runs[0]["partition"] == partition else r
            at = first_at(r["curve"], ref["mean_last3"] - 0.01)
            print(
                f"{partition:14s} {spec:12s} mean(last 3) {100 * r['mean_last3']:5.1f}%  "
                f"worst {100 * r['min_last']:5.1f}%  late worst {100 * r['late_worst']:5.1f}%  "
                f"{r['mb_per_peer']:8.2f} MB/peer  "
                f"at {ref['codec']}-1pt: {at}  codec {r['codec_s']:.1f}s",
                flush=True,
            )
    if opts.json:
        Path(opts.json).write_text(json.dumps(runs))
    return 0


if __name__ == "__main__":
    sys.exit(main())
