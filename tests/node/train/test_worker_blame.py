"""What the training worker says and keeps when a received model breaks or outlives training."""

from __future__ import annotations

import numpy as np
import pytest
from swarmnode.kernels.backend import select_backend
from swarmnode.kernels.optim import make_optimizer
from swarmnode.node.train.errors import DivergedError
from swarmnode.node.train.model.builtin import build_model
from swarmnode.node.train.trainer import Trainer
from swarmnode.node.train.worker import TrainingWorker

pytestmark = [pytest.mark.timeout(30), pytest.mark.filterwarnings("ignore::RuntimeWarning")]


def _worker(max_steps: int | None = None) -> TrainingWorker:
    rng = np.random.default_rng(0)
    X = rng.standard_normal((64, 6)).astype(np.float32)
    y = (X[:, 0] > 0).astype(np.int64)
    model = build_model("mlp:8", (6,), 2, select_backend("cpu"), 0)
    trainer = Trainer(model, make_optimizer("sgd", model.params, 0.05), X, y, 16, 0)
    return TrainingWorker(trainer, eval_every=10**9, max_steps=max_steps)


def test_a_divergence_right_after_a_mix_blames_the_received_model_not_the_lr():
    w = _worker()
    w.trainer.model.params.data[...] = 1e30  # broken by itself: no mix involved
    w.start()
    assert w.join(10)
    assert isinstance(w.error, DivergedError) and "received" not in str(w.error), w.error
    w2 = _worker()
    w2.start()
    w2.mix(np.full(w2.trainer.model.params.size, 1e30, dtype=np.float32), 0.5)
    assert w2.join(10)
    msg = str(w2.error)
    assert isinstance(w2.error, DivergedError) and "received from the swarm" in msg, msg


def test_mixes_after_the_last_step_are_dropped_so_the_last_evaluation_stands():
    w = _worker(max_steps=5)
    w.start()
    assert w.join(10) and w.error is None
    before = w.trainer.model.params.data.copy()
    w.mix(np.zeros(before.size, dtype=np.float32), 0.5)
    np.testing.assert_array_equal(w.trainer.model.params.data, before)
    assert w.mixes_dropped == 1 and w.steps_run == 5
