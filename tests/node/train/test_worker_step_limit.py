"""The worker's step limit (the exchange's bounded staleness) and its utilization figure."""

from __future__ import annotations

import time

import numpy as np
import pytest
from swarmnode.kernels.backend import select_backend
from swarmnode.kernels.optim import make_optimizer
from swarmnode.node.train.model.builtin import build_model
from swarmnode.node.train.trainer import Trainer
from swarmnode.node.train.worker import TrainingWorker

from tests.waiting import wait_for

pytestmark = pytest.mark.timeout(30)


def _worker(max_steps: int | None = None) -> TrainingWorker:
    rng = np.random.default_rng(0)
    X = rng.standard_normal((64, 6)).astype(np.float32)
    y = (X[:, 0] > 0).astype(np.int64)
    model = build_model("mlp:8", (6,), 2, select_backend("cpu"), 0)
    trainer = Trainer(model, make_optimizer("sgd", model.params, 0.05), X, y, 16, 0)
    return TrainingWorker(trainer, eval_every=10**9, max_steps=max_steps)


def _held_at(w: TrainingWorker, step: int) -> None:
    """Until the thread sits at `step` and has begun to wait there."""
    wait_for(lambda: w.trainer.step_count == step and w._held_since is not None, 10, "held")


def test_the_thread_stops_at_the_limit_serves_work_and_resumes_when_it_moves():
    w = _worker(max_steps=40)
    w.set_step_limit(5)
    w.start()
    try:
        _held_at(w, 5)
        # held, but a round's requests are still served: a submit, a mix, an outer step
        assert w.submit(lambda p: "served").result(timeout=5) == "served"
        before = np.array(w.trainer.model.params.data, copy=True)
        w.mix(np.zeros_like(before), 0.5)
        wait_for(lambda: not w.mixes.pending, 5, "the mix applied while held")
        np.testing.assert_allclose(w.trainer.model.params.data, before * 0.5, rtol=1e-6)
        assert w.trainer.step_count == 5  # ... and no step was taken meanwhile
        w.set_step_limit(12)
        _held_at(w, 12)
        w.set_step_limit(None)  # alone again: no limit
        assert w.join(10) and w.error is None
    finally:
        w.stop(5)
    assert w.trainer.step_count == 40
    assert w.waited_s > 0


def test_utilization_is_the_share_of_time_not_held():
    w = _worker(max_steps=10)
    w.start()
    assert w.join(10)
    assert w.utilization() == 1.0 and w.waited_s == 0.0 and w.metrics().utilization == 1.0

    w = _worker(max_steps=10)
    w.set_step_limit(3)
    w.start()
    try:
        _held_at(w, 3)
        time.sleep(0.3)  # the wait being measured, not a wait for state
        live = w.utilization()
        assert live < 1.0  # the wait in progress already counts
        w.set_step_limit(None)
        assert w.join(10)
    finally:
        w.stop(5)
    life = w._end_elapsed
    assert life is not None and w.waited_s >= 0.3
    assert w.utilization() == pytest.approx(1 - w.waited_s / life)
    assert w.metrics().utilization == pytest.approx(w.utilization())
    assert w.metrics().waited_s == w.waited_s


def test_a_stop_ends_a_held_thread_at_once():
    w = _worker()
    w.set_step_limit(2)
    w.start()
    _held_at(w, 2)
    t0 = time.monotonic()
    assert w.stop(5)
    assert time.monotonic() - t0 < 2
    assert w.trainer.step_count == 2
