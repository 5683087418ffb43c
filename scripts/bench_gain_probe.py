"""What `--lr-scale adaptive`'s half-batch probe costs a training step (node/train/gain.py).

Two trainers on the same data and model, one with the probe, stepped in turn (`--reps`
alternations of `--steps` steps each, so that other load on the machine falls on both alike);
prints each block's ms per step and the ratio of the medians.

    .venv/bin/python scripts/bench_gain_probe.py --model mlp:128 --steps 300
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Sequence

import numpy as np
from sim_swarm import build  # the simulator's trainer: same model, optimizer and settings
from swarmnode.node.train.data import load_dataset
from swarmnode.node.train.gain import GainRatio, HalfBatchProbe


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--data", default="signal:2000,64,20")
    p.add_argument("--model", default="mlp:128")
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--steps", type=int, default=300)
    p.add_argument("--reps", type=int, default=5)
    opts = p.parse_args(argv)
    opts.lr, opts.momentum, opts.wd, opts.seed = 0.05, 0.9, 5e-4, 0  # sim_swarm's defaults
    data = load_dataset(opts.data)
    plain, probed = (build(opts, data, None, opts.batch_size) for _ in range(2))
    probed.grad_probe = HalfBatchProbe(GainRatio())
    times: dict[str, list[float]] = {"plain": [], "probed": []}
    for _ in range(opts.reps):
        for name, t in (("plain", plain), ("probed", probed)):
            t0 = time.perf_counter()
            for _ in range(opts.steps):
                t.step()
            times[name].append((time.perf_counter() - t0) / opts.steps * 1e3)
    for name, ms in times.items():
        print(f"{opts.model} {name:6} ms/step: " + " ".join(f"{x:.2f}" for x in ms))
    print(
        f"median ratio probed / plain: {np.median(times['probed']) / np.median(times['plain']):.2f}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
