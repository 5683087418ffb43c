"""Snapshots wait for a training step's parameter update, not for its forward/backward
(node/train/worker.py: the parameter lock, `Trainer.update_lock`)."""

from __future__ import annotations

import concurrent.futures
import threading

import numpy as np
import pytest
from swarmnode.kernels.backend import select_backend
from swarmnode.kernels.optim import make_optimizer
from swarmnode.node.peer.param_store import WorkerStore
from swarmnode.node.train.model.builtin import build_model
from swarmnode.node.train.trainer import Trainer
from swarmnode.node.train.worker import TrainingWorker

pytestmark = pytest.mark.timeout(30)


def test_a_snapshot_during_a_forward_backward_returns_the_last_updated_model() -> None:
    rng = np.random.default_rng(0)
    X = rng.standard_normal((64, 6)).astype(np.float32)
    y = (X[:, 0] > 0).astype(np.int64)
    model = build_model("mlp:8", (6,), 2, select_backend("cpu"), 0)
    trainer = Trainer(model, make_optimizer("sgd", model.params, 0.05), X, y, 16, 0)
    worker = TrainingWorker(trainer, eval_every=10**9)
    inside, release = threading.Event(), threading.Event()
    grads = model.loss_and_grad

    def held(*args: object) -> object:  # the third step's forward/backward never ends alone
        if trainer.step_count == 2:
            inside.set()
            assert release.wait(20)
        return grads(*args)

    model.loss_and_grad = held  # type: ignore[method-assign]
    worker.start()
    pool = concurrent.futures.ThreadPoolExecutor(1)
    try:
        assert inside.wait(10)
        before = model.params.data.copy()
        step, snap = pool.submit(worker.snapshot).result(timeout=10)  # it used to wait here
        assert step == 2
        np.testing.assert_array_equal(snap, before)
        release.set()
        worker.stop(10)
        step, snap = worker.snapshot()
        np.testing.assert_array_equal(snap, model.params.data)
        assert step == trainer.step_count >= 3
    finally:
        release.set()
        worker.stop(10)
        pool.shutdown()


async def test_distances_read_the_model_in_place_under_the_update_lock() -> None:
    """`TrainingWorker.read` hands its function the parameters themselves (no snapshot copy)
    with the update lock held, and the store's distance and norm are the model's."""
    X = np.zeros((8, 6), np.float32)
    model = build_model("mlp:8", (6,), 2, select_backend("cpu"), 0)
    trainer = Trainer(model, make_optimizer("sgd", model.params, 0.05), X, np.zeros(8, int), 4, 0)
    worker = TrainingWorker(trainer, eval_every=10**9)
    params = model.params.data
    assert worker.read(lambda x: x is params and trainer.update_lock.locked())
    store = WorkerStore(worker)
    try:
        other = params + np.float32(0.5)
        assert await store.distance(other) == pytest.approx(0.5 * np.sqrt(params.size))
        assert await store.norm() == pytest.approx(float(np.linalg.norm(params.astype(float))))
    finally:
        await store.close()


async def test_a_counted_mix_adds_its_move_to_the_round_s_count_before_returning() -> None:
    """`WorkerStore.mix_in(..., moved=m)`: the fold (on the store's thread, under the update
    lock) adds the move it makes to m, and the call returns once it has: the round that lands
    by m right after finds it there."""
    from swarmnode.gossip.exchange import Moved

    X = np.zeros((8, 6), np.float32)
    model = build_model("mlp:8", (6,), 2, select_backend("cpu"), 0)
    trainer = Trainer(model, make_optimizer("sgd", model.params, 0.05), X, np.zeros(8, int), 4, 0)
    worker = TrainingWorker(trainer, eval_every=10**9)
    store = WorkerStore(worker)
    before = model.params.data.copy()
    moved = Moved()
    try:
        await store.mix_in(before + np.float32(2.0), 0.25, source="p1", moved=moved)
        counted = np.zeros_like(before)
        moved.take_from(counted)
        np.testing.assert_allclose(-counted, model.params.data - before, rtol=1e-6)
        np.testing.assert_allclose(-counted, 0.5, rtol=1e-6)  # 0.25 x 2.0
    finally:
        await store.close()
