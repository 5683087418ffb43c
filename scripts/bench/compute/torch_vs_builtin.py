#!/usr/bin/env python
"""The same MLP three ways: built-in (`mlp:W`), plain numpy (examples/own_numpy_model.py's
TwoLayerNet) and torch (`swarmnode.TorchModel`, through DLPack).

    .venv/bin/python scripts/bench/compute/torch_vs_builtin.py          # needs torch for its row
    .venv/bin/python scripts/bench/compute/torch_vs_builtin.py --seeds 5 --only digits

One peer's trainer each (`build_trainer`, what `swarmnode start` builds): D-W-C with ReLU,
softmax cross-entropy, swarmnode's SGD (lr 0.05, momentum 0.9). Two cases: the bundled digits
(64-128-10, batch 32, 1500 steps: a tiny model, where per-step overheads show) and a wide one
(synthetic:8192,1024,10, 1024-1024-10, batch 256, 200 steps: matrix products dominate). The
models differ only in their initialisation (each framework's own). Per seed and model: the
final test accuracy and the mean time of a training step; the rounds interleave the models so
that a busy machine slows all of them alike. Timings are reported as a ratio to the built-in
model's, measured in the same run. One BLAS / torch thread, as a peer runs.
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")  # before numpy and torch load their thread pools

EXAMPLES = Path(__file__).resolve().parents[3] / "examples"
# name: (data, hidden width, batch, steps)
CASES = {
    "digits": ("digits", 128, 32, 1500),
    "wide": ("synthetic:8192,1024,10", 1024, 256, 200),
}


def models(width: int, with_torch: bool) -> dict[str, Any]:
    """The three models of one case, as `--model` values (a spec, or factories)."""
    from own_numpy_model import TwoLayerNet

    def numpy_net(input_shape, n_classes, seed):
        return TwoLayerNet(math.prod(input_shape), width, n_classes, seed)

    out: dict[str, Any] = {"builtin": f"mlp:{width}", "numpy": numpy_net}
    if with_torch:
        import torch
        from torch import nn

        import swarmnode

        def torch_net(input_shape, n_classes, seed):
            torch.manual_seed(seed)
            net = nn.Sequential(
                nn.Flatten(), nn.Linear(math.prod(input_shape), width), nn.ReLU(),
                nn.Linear(width, n_classes),
            )  # fmt: skip
            return swarmnode.TorchModel(net, nn.functional.cross_entropy)

        out["torch"] = torch_net
    return out


def has_torch(skip: bool) -> bool:
    if skip:
        return False
    try:
        import torch
    except ImportError:
        print("torch is not installed: its rows are left out (pip install 'swarmnode[torch]')")
        return False
    torch.set_num_threads(1)
    return True


def run_one(model: Any, data: str, batch: int, seed: int, steps: int) -> tuple[float, float]:
    """(final test accuracy, seconds per step) of one trainer."""
    from swarmnode.node.train.build import build_trainer
    from swarmnode.node.train.config import NodeConfig

    cfg = NodeConfig(model=model, data=data, batch_size=batch, seed=seed, device="cpu")
    trainer, dataset, _ = build_trainer(cfg.validate())
    warm = max(steps // 20, 5)  # first-call allocations
    for _ in range(warm):
        trainer.step()
    t0 = time.perf_counter()
    for _ in range(steps - warm):
        trainer.step()
    per_step = (time.perf_counter() - t0) / (steps - warm)
    return trainer.evaluate(dataset.X_test, dataset.y_test)[1], per_step


def bench_case(name: str, seeds: int, with_torch: bool) -> None:
    data, width, batch, steps = CASES[name]
    case = models(width, with_torch)
    acc: dict[str, list[float]] = {k: [] for k in case}
    step: dict[str, list[float]] = {k: [] for k in case}
    for seed in range(seeds):
        for label, model in case.items():
            a, s = run_one(model, data, batch, seed, steps)
            acc[label].append(a)
            step[label].append(s)
    base = statistics.median(step["builtin"])
    print(f"\n{name}: {data}, hidden {width}, batch {batch}, {steps} steps, {seeds} seeds")
    print(
        f"{'model':8} {'acc min':>8} {'acc mean':>9} {'acc max':>8} {'us/step':>9} {'x builtin':>10}"
    )
    for label in case:
        med = statistics.median(step[label])
        print(
            f"{label:8} {min(acc[label]):8.2%} {statistics.mean(acc[label]):9.2%} "
            f"{max(acc[label]):8.2%} {med * 1e6:9.0f} {med / base:10.2f}"
        )


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--seeds", type=int, default=5, help="seeds (rounds) per model")
    p.add_argument("--only", choices=sorted(CASES), help="run one case")
    p.add_argument("--no-torch", action="store_true", help="leave the torch model out")
    opts = p.parse_args(argv)
    sys.path.insert(0, str(EXAMPLES))
    with_torch = has_torch(opts.no_torch)
    for name in [opts.only] if opts.only else CASES:
        bench_case(name, opts.seeds, with_torch)
    return 0


if __name__ == "__main__":
    sys.exit(main())
