"""The collapse guard against honest far mixes and hostile ones, on the node's own worker.

    .venv/bin/python scripts/sim/collapse.py [--model mlp:512]

One `TrainingWorker` with the guard on (node/train/mixing/collapse.py), stepped one turn at a
time on digits (sgd 0.05, momentum 0.9, batch 32, the node's defaults), 600 steps first with a
small honest mix every 10 (the usual post-mix loss). Then, each from a fresh worker:

- far: a model trained 400 steps on the other classes (this peer holds classes 0-2), mixed
  0.7 of the way: honest, far, and SGD undoes it;
- liar xS: the own model with its classifier scaled by S, mixed 0.5 (a loss that blows up,
  or jumps and stays);
- drag S: one push every step, S toward the model with every hidden bias at -100 (the drag
  of fault/hostile/drag.py, with no push bound or budget in its way).

Prints the verdict and at which step after the mix, the test accuracy (on the classes the
peer holds) before, at the verdict and 10 steps later, and the losses of those steps.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from swarmnode.kernels.backend import select_backend
from swarmnode.kernels.optim import make_optimizer
from swarmnode.node.train.data.datasets import Dataset, load_dataset
from swarmnode.node.train.mixing.collapse import CollapseGuard, dead_fraction
from swarmnode.node.train.model.builtin import build_model
from swarmnode.node.train.trainer import Trainer
from swarmnode.node.train.worker import TrainingWorker

LIMIT = 40  # steps watched for a verdict


def _trainer(data: Dataset, model: str, rows: np.ndarray, seed: int) -> Trainer:
    m = build_model(model, data.input_shape, 10, select_backend("cpu"), 0)
    opt = make_optimizer("sgd", m.params, 0.05, momentum=0.9)
    return Trainer(m, opt, data.X_train[rows], data.y_train[rows], 32, seed)


def _worker(data: Dataset, model: str, rows: np.ndarray) -> tuple[TrainingWorker, list]:
    w = TrainingWorker(_trainer(data, model, rows, 1), eval_every=10**9)
    w._running = True  # mixes wait for the next turn, as with the thread
    blamed: list[set[str]] = []
    w.collapse, w.on_collapse = CollapseGuard(10), blamed.append
    for i in range(600):
        if i % 10 == 0:
            x = w.trainer.model.params.data
            noise = np.random.default_rng(i).standard_normal(x.size).astype(np.float32)
            w.mix(x + 0.001 * noise, 0.5, source="honest")
        w._turn()
    return w, blamed


def _acc(w: TrainingWorker, data: Dataset, classes: int = 10) -> float:
    """Test accuracy on the classes below `classes` (the ones this peer holds)."""
    rows = data.y_test < classes
    return float(w.trainer.evaluate(data.X_test[rows], data.y_test[rows])[1])


def _watch(
    name: str, w: TrainingWorker, blamed: list, data: Dataset, before: float, classes: int = 10
) -> None:
    losses = []
    while not blamed and len(losses) < LIMIT:
        losses.append(w._turn())
        if not blamed and w._judged is None:
            break  # passed
    at = _acc(w, data, classes)
    for _ in range(10):
        w._turn()
    verdict = f"rolled back at step {len(losses)}" if blamed else f"passed at step {len(losses)}"
    shown = " ".join(f"{v:.3g}" for v in losses[:12]) + (" ..." if len(losses) > 12 else "")
    print(
        f"{name:12} {verdict:22} acc {before:.3f} -> {at:.3f} -> {_acc(w, data, classes):.3f}  {shown}"
    )


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", default="mlp:512")
    args = p.parse_args()
    data = load_dataset("digits")
    y = data.y_train
    mine, others = np.flatnonzero(y < 3), np.flatnonzero(y >= 3)
    everything = np.arange(len(y))

    w, blamed = _worker(data, args.model, mine)
    far = _trainer(data, args.model, others, 2)
    for _ in range(400):
        far.step()
    before = _acc(w, data, 3)
    w.mix(far.model.params.data, 0.7, source="far")
    _watch("far 0.7", w, blamed, data, before, 3)

    for scale in (-20.0, -3.0, -1.5, -1.0):
        w, blamed = _worker(data, args.model, everything)
        x = w.trainer.model.params.data.copy()
        lo, hi = w.trainer.model.params.offsets["3.W"]
        x[lo:hi] *= scale
        before = _acc(w, data)
        w.mix(x, 0.5, source="liar")
        _watch(f"liar x{scale:g}", w, blamed, data, before)

    for step in (0.2, 1.0):
        w, blamed = _worker(data, args.model, everything)
        lo, hi = w.trainer.model.params.offsets["1.b"]
        pushes = 0
        while not blamed and pushes < 2000:
            x = w.trainer.model.params.data
            toward = x.copy()
            toward[lo:hi] = -100.0
            toward -= x
            w.mix(x + step * toward / np.linalg.norm(toward), 0.5, source="drag")
            w._turn()
            pushes += 1
        dead = dead_fraction(w.trainer.model.layers) or 0.0
        print(f"drag {step:<7g} caught after {pushes} pushes, {dead:.0%} of the units dead then")
    return 0


if __name__ == "__main__":
    sys.exit(main())
