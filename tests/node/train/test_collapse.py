"""The collapse guard (issue 22): the step right after a mix of pushed models judges it, and a
mix that kills the hidden units or makes the loss jump is rolled back and its senders named.

The worker's loop is driven one iteration at a time (`_iteration`: apply the pending mixes,
step, judge), so each test knows exactly which step saw which mix."""

from __future__ import annotations

import numpy as np
import pytest
from swarmnode.kernels.backend import select_backend
from swarmnode.kernels.optim import make_optimizer
from swarmnode.node.train.mixing.collapse import CollapseGuard, dead_fraction
from swarmnode.node.train.model.builtin import build_model
from swarmnode.node.train.trainer import Trainer
from swarmnode.node.train.worker import TrainingWorker

pytestmark = pytest.mark.timeout(30)


def _worker() -> tuple[TrainingWorker, list[set[str]]]:
    rng = np.random.default_rng(0)
    X = rng.standard_normal((256, 6)).astype(np.float32)
    y = (X[:, 0] + X[:, 1] > 0).astype(np.int64)
    model = build_model("mlp:16", (6,), 2, select_backend("cpu"), 0)
    trainer = Trainer(model, make_optimizer("sgd", model.params, 0.1), X, y, 32, 0)
    w = TrainingWorker(trainer, eval_every=10**9)
    w._running = True  # mixes wait for the next step (as with the thread), which tests take
    blamed: list[set[str]] = []
    w.collapse, w.on_collapse = CollapseGuard(2), blamed.append
    return w, blamed


def _iteration(w: TrainingWorker) -> float:
    """One turn of the training loop, as `TrainingWorker._loop` takes it."""
    return w._turn()


def _warm(w: TrainingWorker, steps: int = 200) -> None:
    for _ in range(steps):
        _iteration(w)


def _hidden_bias(w: TrainingWorker) -> np.ndarray:
    return w.trainer.model.params.views["1.b"]


def _with_hidden_bias(w: TrainingWorker, value: float) -> np.ndarray:
    x = w.trainer.model.params.data.copy()
    lo, hi = w.trainer.model.params.offsets["1.b"]
    x[lo:hi] = value
    return x


def _honest_mix(w: TrainingWorker, sender: str = "h") -> None:
    """A push from a peer a little apart (the own model, slightly perturbed)."""
    x = w.trainer.model.params.data
    other = x + 0.01 * np.random.default_rng(1).standard_normal(x.size).astype(np.float32)
    w.mix(other, 0.5, source=sender)
    _iteration(w)


def test_dead_fraction_counts_hidden_units_that_fire_for_no_sample() -> None:
    w, _ = _worker()
    _iteration(w)
    assert dead_fraction(w.trainer.model.layers) < 0.2
    w.trainer.model.params.data[...] = _with_hidden_bias(w, -100.0)
    _iteration(w)
    assert dead_fraction(w.trainer.model.layers) == 1.0
    linear = build_model("linear", (6,), 2, select_backend("cpu"), 0)
    assert dead_fraction(linear.layers) is None  # no ReLU: nothing to count


def test_a_mix_that_kills_the_hidden_units_is_rolled_back_and_its_pusher_named() -> None:
    w, blamed = _worker()
    _warm(w)
    _honest_mix(w)  # the usual post-mix loss
    before = _hidden_bias(w).copy()
    w.mix(_with_hidden_bias(w, -100.0), 0.5, source="drag")  # half way to every unit dead
    _iteration(w)
    assert blamed == [{"drag"}] and w.collapse.rollbacks == 1
    # the biases are back where they were, but for the one step taken on the mixed model
    np.testing.assert_allclose(_hidden_bias(w), before, atol=0.02)  # not -50: rolled back
    _iteration(w)
    assert dead_fraction(w.trainer.model.layers) < 0.25


def test_a_mix_that_makes_the_loss_jump_is_rolled_back() -> None:
    w, blamed = _worker()
    _warm(w)
    for _ in range(3):
        _honest_mix(w)
    x = w.trainer.model.params.data.copy()
    lo, hi = w.trainer.model.params.offsets["3.W"]
    x[lo:hi] *= -20.0  # the classifier turned against its labels: units alive, loss high
    w.mix(x, 0.5, source="liar")
    _iteration(w)
    assert blamed == [{"liar"}], (w.collapse.post_loss, w.collapse.rollbacks)


def test_honest_mixes_and_round_mixes_pass() -> None:
    w, blamed = _worker()
    _warm(w)
    for i in range(20):
        _honest_mix(w, f"h{i % 3}")
    assert blamed == [] and w.collapse.rollbacks == 0
    assert w.collapse.post_loss is not None and w.collapse.base_dead is not None


def test_a_rounds_own_mix_that_collapses_is_rolled_back_and_names_nobody() -> None:
    w, blamed = _worker()
    _warm(w)
    _honest_mix(w)
    before = _hidden_bias(w).copy()
    w.mix(_with_hidden_bias(w, -100.0), 0.5)  # a round's result: its partners picked at random
    _iteration(w)
    assert w.collapse.rollbacks == 1 and blamed == []
    np.testing.assert_allclose(_hidden_bias(w), before, atol=0.02)


def test_mixes_applied_while_held_at_the_step_limit_are_judged_and_rolled_back_together() -> None:
    """Held at --max-lead's step limit, the worker applies mixes without stepping; the next
    step judges all of them, and a rollback undoes each one (not the last alone)."""
    w, blamed = _worker()
    _warm(w)
    _honest_mix(w)
    before = _hidden_bias(w).copy()
    w.mix(_with_hidden_bias(w, -40.0), 0.5, source="drag")
    with w._params_lock:
        w._apply_mixes()  # what `_wait_at_limit` does while held: no step in between
    w.mix(_with_hidden_bias(w, -40.0), 0.5, source="drag2")
    with w._params_lock:
        w._apply_mixes()
    _iteration(w)
    assert blamed == [{"drag", "drag2"}] and w.collapse.rollbacks == 1
    np.testing.assert_allclose(_hidden_bias(w), before, atol=0.02)
