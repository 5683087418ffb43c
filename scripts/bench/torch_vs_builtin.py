#!/usr/bin/env python
"""The same MLP three ways: built-in (`mlp:128`), plain numpy (examples/own_numpy_model.py) and
torch (examples/own_torch_model.py, through swarmnode.TorchModel and DLPack).

    .venv/bin/python scripts/bench/torch_vs_builtin.py               # needs torch for its row
    .venv/bin/python scripts/bench/torch_vs_builtin.py --seeds 5 --steps 1500

One peer's trainer each (`build_trainer`, what `swarmnode start` builds): 64-128-10 with ReLU,
softmax cross-entropy, swarmnode's SGD (lr 0.05, momentum 0.9), batch 32, on the bundled digits.
The models differ only in their initialisation (each framework's own). Per seed and model: the
final test accuracy and the mean time of a training step; the rounds interleave the models so
that a busy machine slows all of them alike. Timings are reported as a ratio to the built-in
model's, measured in the same run. One BLAS / torch thread, as a peer runs.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")  # before numpy and torch load their thread pools

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
MODELS = {"builtin": "mlp:128", "numpy": "own_numpy_model:build", "torch": "own_torch_model:build"}


def _models(skip_torch: bool) -> dict[str, str]:
    if skip_torch:
        return {k: v for k, v in MODELS.items() if k != "torch"}
    try:
        import torch

        torch.set_num_threads(1)
    except ImportError:
        print("torch is not installed: its row is left out (pip install 'swarmnode[torch]')")
        return {k: v for k, v in MODELS.items() if k != "torch"}
    return MODELS


def run_one(spec: str, seed: int, steps: int) -> tuple[float, float]:
    """(final test accuracy, seconds per step) of one trainer."""
    from swarmnode.node.train.build import build_trainer
    from swarmnode.node.train.config import NodeConfig

    cfg = NodeConfig(model=spec, data="digits", seed=seed, steps=steps, device="cpu")
    trainer, data, _ = build_trainer(cfg.validate())
    for _ in range(20):  # warm-up: first-call allocations
        trainer.step()
    t0 = time.perf_counter()
    for _ in range(steps - 20):
        trainer.step()
    per_step = (time.perf_counter() - t0) / (steps - 20)
    return trainer.evaluate(data.X_test, data.y_test)[1], per_step


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--seeds", type=int, default=5, help="seeds (rounds) per model")
    p.add_argument("--steps", type=int, default=1500, help="training steps per run")
    p.add_argument("--no-torch", action="store_true", help="leave the torch model out")
    opts = p.parse_args(argv)
    sys.path.insert(0, str(EXAMPLES))
    models = _models(opts.no_torch)
    acc: dict[str, list[float]] = {k: [] for k in models}
    step: dict[str, list[float]] = {k: [] for k in models}
    for seed in range(opts.seeds):
        for name, spec in models.items():
            a, s = run_one(spec, seed, opts.steps)
            acc[name].append(a)
            step[name].append(s)
    base = statistics.median(step["builtin"])
    print(f"digits, {opts.steps} steps, batch 32, sgd lr 0.05; {opts.seeds} seeds per model")
    print(
        f"{'model':8} {'acc min':>8} {'acc mean':>9} {'acc max':>8} {'us/step':>8} {'x builtin':>10}"
    )
    for name in models:
        med = statistics.median(step[name])
        print(
            f"{name:8} {min(acc[name]):8.2%} {statistics.mean(acc[name]):9.2%} "
            f"{max(acc[name]):8.2%} {med * 1e6:8.0f} {med / base:10.2f}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
