"""Trainer (determinism, exact resume, divergence) and TrainingWorker (thread-safe API)."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest
from swarmnode.node.train.build import build_trainer
from swarmnode.node.train.config import NodeConfig
from swarmnode.node.train.data.datasets import load_dataset
from swarmnode.node.train.errors import CheckpointError, DivergedError
from swarmnode.node.train.lr.scale import SwarmLR
from swarmnode.node.train.trainer import Trainer
from swarmnode.node.train.worker import TrainingWorker, WorkerMetrics

from tests.waiting import wait_for

# A small shard (~180 samples) so that a few dozen steps cross several epoch boundaries.
SMALL = dict(model="mlp:16", device="cpu", batch_size=32, shard=(1, 8), lr=0.05)


def _trainer(**kw: object) -> Trainer:
    cfg = NodeConfig(**{**SMALL, **kw}).validate()
    trainer, _, _ = build_trainer(cfg)
    return trainer


def _params(t: Trainer) -> np.ndarray:
    return np.array(t.model.params.data, copy=True)


def _run(t: Trainer, n: int) -> list[float]:
    return [t.step() for _ in range(n)]


def test_same_seed_is_bit_identical_and_other_seed_differs() -> None:
    a, b, c = _trainer(seed=3), _trainer(seed=3), _trainer(seed=4)
    assert _run(a, 15) == _run(b, 15)
    np.testing.assert_array_equal(_params(a), _params(b))
    _run(c, 15)
    assert not np.array_equal(_params(a), _params(c))


def test_counters_and_epochs() -> None:
    t = _trainer(seed=0)
    per_epoch = t.n_samples // t.batch_size
    _run(t, 2 * per_epoch + 1)
    assert t.step_count == 2 * per_epoch + 1
    assert t.samples_seen == t.step_count * t.batch_size
    assert t.epoch == 2


def test_resume_from_state_is_exact_across_epoch_boundaries() -> None:
    full = _trainer(seed=1)
    losses_full = _run(full, 25)

    first = _trainer(seed=1)
    losses_a = _run(first, 11)
    state = first.state()
    _run(first, 3)  # the state must be a copy, not a view of the live model
    resumed = _trainer(seed=1)
    resumed.load_state(state)
    losses_b = _run(resumed, 14)

    assert losses_a + losses_b == losses_full
    np.testing.assert_array_equal(_params(resumed), _params(full))
    assert resumed.step_count == 25 and resumed.samples_seen == full.samples_seen


def test_load_state_from_another_model_is_refused() -> None:
    state = _trainer(seed=0).state()
    with pytest.raises(CheckpointError, match="another model"):
        _trainer(seed=0, model="mlp:8").load_state(state)
    with pytest.raises(CheckpointError, match="training samples"):
        _trainer(seed=0, shard=(0, 2)).load_state(state)


def _snapshot(t: Trainer) -> dict:
    """Everything load_state may assign, copied."""
    return {
        "params": _params(t),
        "opt": {k: np.array(v, copy=True) for k, v in t.optimizer.state_dict().items()},
        "counters": (t.step_count, t.samples_seen, t.epoch, t._pos),
        "perm": t._perm.copy(),
        "rng": t._rng.bit_generator.state,
    }


def _assert_unchanged(t: Trainer, before: dict) -> None:
    after = _snapshot(t)
    np.testing.assert_array_equal(after["params"], before["params"])
    np.testing.assert_array_equal(after["perm"], before["perm"])
    assert after["counters"] == before["counters"] and after["rng"] == before["rng"]
    assert after["opt"].keys() == before["opt"].keys()
    for k in before["opt"]:
        np.testing.assert_array_equal(after["opt"][k], before["opt"][k])


def _corrupt(state: dict, case: str) -> None:
    if case == "nan_params":
        state["params"][3] = np.nan
    elif case == "float64_params":
        state["params"] = state["params"].astype(np.float64)
    elif case == "other_optimizer":
        state["optimizer"] = {"name": "adamw", "t": 3, "lr": 0.1}
    elif case == "velocity_shape":
        state["optimizer"]["velocity"] = state["optimizer"]["velocity"][:-1]
    elif case == "velocity_nan":
        state["optimizer"]["velocity"][0] = np.inf
    elif case == "optimizer_t":
        state["optimizer"]["t"] = -2
    elif case == "rng_layout":
        state["rng"] = {"bit_generator": "PCG64", "state": {"state": "x"}}
    elif case == "rng_kind":
        state["rng"] = {**state["rng"], "bit_generator": "MT19937"}
    elif case == "perm_repeats":
        state["epoch_perm"][1] = state["epoch_perm"][0]
    elif case == "perm_float":
        state["epoch_perm"] = state["epoch_perm"].astype(np.float64)
    elif case == "negative_step":
        state["step"] = -1
    elif case == "pos_past_end":
        state["epoch_pos"] = 10**6
    elif case == "missing_rng":
        del state["rng"]
    else:
        raise AssertionError(case)


LOAD_CASES = {
    "nan_params": "NaN or Inf",
    "float64_params": "another model",
    "other_optimizer": "--optimizer 'adamw', this run uses 'sgd'",
    "velocity_shape": "'velocity' is not",
    "velocity_nan": "'velocity' is not",
    "optimizer_t": "'t' must be an int >= 0",
    "rng_layout": "RNG state is malformed",
    "rng_kind": "RNG state is malformed",
    "perm_repeats": "not a permutation",
    "perm_float": "not a permutation",
    "negative_step": "'step' must be an int >= 0",
    "pos_past_end": "epoch_pos",
    "missing_rng": "lacks rng",
}


@pytest.mark.parametrize("case", sorted(LOAD_CASES))
def test_rejected_state_leaves_the_trainer_untouched(case: str) -> None:
    source = _trainer(seed=5)
    _run(source, 9)
    state = source.state()
    _corrupt(state, case)
    target = _trainer(seed=6)
    _run(target, 4)
    before = _snapshot(target)
    with pytest.raises(CheckpointError, match=LOAD_CASES[case]) as info:
        target.load_state(state)
    assert "\n" not in str(info.value)
    _assert_unchanged(target, before)
    _run(target, 2)  # and it still trains


def test_labels_can_be_replaced_for_a_label_flipping_peer() -> None:
    t = _trainer(seed=0)
    y = t.labels()
    assert y.shape == (t.n_samples,) and y.dtype == np.int64
    flipped = (y + 1) % 10
    t.set_labels(flipped)
    np.testing.assert_array_equal(t.labels(), flipped)
    y[0] = 99  # labels() is a copy, not a view into the trainer
    assert t.labels()[0] != 99
    with pytest.raises(ValueError, match="labels"):
        t.set_labels(flipped[:-1])
    _run(t, 3)


def test_training_learns_digits() -> None:
    t = _trainer(seed=0, shard=(0, 1), model="mlp:32")
    data = load_dataset("digits")
    loss0, acc0 = t.evaluate(data.X_test, data.y_test)
    _run(t, 300)
    loss1, acc1 = t.evaluate(data.X_test, data.y_test)
    assert loss1 < loss0 / 3 and acc1 > 0.9 > acc0


def _diverging_trainer() -> Trainer:
    """A trainer whose 4th batch holds an Inf input, so its loss is not finite."""
    t = _trainer(seed=0)
    X = np.ones((8, 8, 8), np.float32)
    X[6] = np.inf
    return Trainer(t.model, t.optimizer, X, np.arange(8) % 2, batch_size=2, seed=0)


@pytest.mark.filterwarnings("ignore::RuntimeWarning")  # inf - inf inside the forward pass
def test_divergence_raises_and_leaves_finite_params() -> None:
    t = _diverging_trainer()
    with pytest.raises(DivergedError, match="smaller --lr"):
        _run(t, 8)
    assert np.isfinite(_params(t)).all()


# --- TrainingWorker -------------------------------------------------------------------------


def _worker(t: Trainer, **kw: object) -> TrainingWorker:
    data = load_dataset("digits")
    return TrainingWorker(t, X_test=data.X_test, y_test=data.y_test, **kw)


@pytest.mark.timeout(60)
def test_worker_runs_to_budget_and_evaluates_on_schedule() -> None:
    seen: list[WorkerMetrics] = []
    w = _worker(_trainer(seed=0), eval_every=10, max_steps=35, on_eval=seen.append)
    w.start()
    assert w.join(timeout=30)
    assert w.error is None and not w.running
    assert [m.step for m in seen] == [10, 20, 30, 35]  # and the last step, off-schedule
    m = w.metrics()
    assert m.step == 35 and m.eval_step == 35 and 0 <= m.test_acc <= 1 and m.samples_per_s > 0


@pytest.mark.timeout(60)
def test_snapshot_is_taken_between_steps() -> None:
    # A snapshot taken while training runs must equal the parameters of a fresh trainer run for
    # exactly the reported number of steps — impossible if it caught an update half-way.
    # No step budget: on a fast box 400 steps were over before the first snapshot was asked.
    w = _worker(_trainer(seed=2), eval_every=10_000, max_steps=None)
    w.start()
    snaps = []
    while w.running and len(snaps) < 5:
        step, params = w.snapshot()
        if 0 < step and (not snaps or step != snaps[-1][0]):
            snaps.append((step, params))
        time.sleep(0.001)  # pacing only: leaves the lock to the training thread
    assert w.stop(timeout=30)
    assert snaps, "no snapshot taken while the worker was running"
    for step, params in snaps[:3]:
        ref = _trainer(seed=2)
        _run(ref, step)
        np.testing.assert_array_equal(params, _params(ref))


@pytest.mark.timeout(60)
def test_submit_runs_on_training_thread_between_steps() -> None:
    w = _worker(_trainer(seed=0), eval_every=10_000, max_steps=10**9)
    w.start()
    try:
        names = w.submit(lambda p: threading.current_thread().name).result(timeout=30)
        assert names == "swarmnode-train"
        fut = w.submit(lambda p: (p.fill(0.0), float(np.abs(p).sum()))[1])
        assert fut.result(timeout=30) == 0.0  # nothing ran between the fill and the read
        failing = w.submit(lambda p: 1 / 0)
        with pytest.raises(ZeroDivisionError):
            failing.result(timeout=30)
        assert w.running  # a failing submitted fn does not kill training
    finally:
        assert w.stop(timeout=30)
    # After the thread ended, submit still runs the fn (inline) instead of losing it.
    assert w.submit(lambda p: p.size).result(timeout=1) == w.trainer.model.params.data.size


@pytest.mark.timeout(60)
def test_throttle_slows_steps_but_stop_is_prompt() -> None:
    w = _worker(_trainer(seed=0), eval_every=10_000, max_steps=10**9)
    w.set_throttle(delay_s=60.0)
    w.start()
    wait_for(lambda: w.trainer.step_count >= 1, 30, "a first step", every=0.005)
    t0 = time.monotonic()
    assert w.stop(timeout=30)
    assert time.monotonic() - t0 < 20  # woken from the throttle sleep, not after 60 s
    assert w.trainer.step_count <= 2
    with pytest.raises(ValueError):
        w.set_throttle(slowdown=0.5)


@pytest.mark.timeout(60)
@pytest.mark.filterwarnings("ignore::RuntimeWarning")
def test_worker_reports_training_errors() -> None:
    w = _worker(_diverging_trainer(), eval_every=10_000, max_steps=10_000)
    w.start()
    assert w.join(timeout=30)
    assert isinstance(w.error, DivergedError) and not w.running


@pytest.mark.timeout(60)
def test_worker_scales_the_lr_with_the_swarm_size_and_keeps_it_alone() -> None:
    # a constant lr: the scale alone (tests/node/train/test_lr_schedule.py composes the two)
    t = _trainer(seed=0, lr_schedule="constant")
    base = t.optimizer.lr
    w = _worker(t, eval_every=10_000, max_steps=30)
    w.lr_scale = SwarmLR("linear", max_n=8, warmup=10)
    w.lr_scale.set_size(4)
    w.start()
    assert w.join(timeout=30) and w.error is None
    assert t.optimizer.lr == pytest.approx(4 * base)
    alone = _trainer(seed=0, lr_schedule="constant")
    w = _worker(alone, eval_every=10_000, max_steps=30)
    w.lr_scale = SwarmLR("linear", max_n=8, warmup=10)
    w.start()
    assert w.join(timeout=30) and w.error is None
    assert alone.optimizer.lr == base
    plain = _ran(_trainer(seed=0, lr_schedule="constant"), 30)
    np.testing.assert_array_equal(_params(alone), _params(plain))


def _ran(t: Trainer, n: int) -> Trainer:
    _run(t, n)
    return t
