"""The collapse guard (issue 22): the steps right after a mix of pushed models judge it, and a
mix that kills the hidden units, blows the loss up, or makes it jump and stay there is rolled
back and its senders named; one whose loss jumps and comes back (one bad batch, or an honest
model far from this peer's) is not.

The worker's loop is driven one iteration at a time (`_iteration`: apply the pending mixes,
step, judge), so each test knows exactly which step saw which mix."""

from __future__ import annotations

import numpy as np
import pytest
from swarmnode.kernels.backend import select_backend
from swarmnode.kernels.optim import make_optimizer
from swarmnode.node.train.data.datasets import load_dataset
from swarmnode.node.train.mixing.collapse import RECOVERY, CollapseGuard, dead_fraction
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


def _with_classifier(w: TrainingWorker, scale: float) -> np.ndarray:
    x = w.trainer.model.params.data.copy()
    lo, hi = w.trainer.model.params.offsets["3.W"]
    x[lo:hi] *= scale
    return x


def _one_class(w: TrainingWorker, gap: float) -> np.ndarray:
    """The own model, but for output biases that favour class 0 by `gap`: it answers 0."""
    x = w.trainer.model.params.data.copy()
    lo, hi = w.trainer.model.params.offsets["3.b"]
    x[lo:hi] = [gap / 2, -gap / 2]
    return x


def test_the_rule_one_batch_over_the_bar_is_watched_not_judged() -> None:
    g = CollapseGuard(10)  # floor 1.15, blow-up 9.2
    for _ in range(20):
        assert g.judge(0.05, None) is None  # the usual post-mix loss: 0.05
    assert g.judge(1.66, None) is None and g.watching == RECOVERY  # over the bar: watched
    assert g.judge(0.03, None) is None and g.watching == 0  # back under it: passed
    assert g.judge(1.66, None) is None
    for _ in range(RECOVERY - 1):
        assert g.judge(1.5, None) is None and g.watching > 0
    why = g.judge(1.5, None)  # RECOVERY steps after the jump, still over: a collapse
    assert why is not None and "jumped to 1.66" in why and g.watching == 0
    assert g.judge(1.66, None) is None and g.watching == RECOVERY
    assert g.judge(7.0, None, fresh=False) is None  # SGD's own swing while watched: no verdict
    assert "blew up to 50" in (g.judge(50.0, None) or "")  # a fresh mix far past a blind guess
    assert g.watching == 0
    g.calm(0.1)
    assert "dead" in (g.judge(0.05, 0.9) or "")  # dead units: at once as well


def test_a_mix_that_blows_the_loss_up_is_rolled_back_at_once() -> None:
    w, blamed = _worker()
    _warm(w)
    for _ in range(3):
        _honest_mix(w)
    # the classifier turned against its labels: units alive, loss far past a blind guess's
    w.mix(_with_classifier(w, -20.0), 0.5, source="liar")
    _iteration(w)
    assert blamed == [{"liar"}], (w.collapse.post_loss, w.collapse.rollbacks)
    # the rollback dropped the optimizer's heading with the mix: the step on the mixed model
    # left a velocity that would carry the restored model where the liar pointed
    assert not np.any(w.trainer.optimizer.velocity)


def test_a_mix_whose_loss_jumps_and_stays_is_rolled_back_with_the_mixes_it_was_watched_with() -> (
    None
):
    """Judged RECOVERY steps later, the rollback still removes exactly what the mixes changed
    (an lr of 1e-12: the steps since move nothing, so the model must be what it was before)."""
    w, blamed = _worker()
    _warm(w)
    _honest_mix(w)
    w.trainer.optimizer.lr = 1e-12
    before = w.trainer.model.params.data.copy()
    w.mix(_one_class(w, 30.0), 0.5, source="liar")  # answers 0: a loss ~1-2, and it stays
    _iteration(w)
    assert w.collapse.watching == RECOVERY and blamed == []
    _honest_mix(w, "h")  # mixed while watched: joins the verdict
    for _ in range(RECOVERY - 1):
        _iteration(w)
    assert blamed == [{"liar", "h"}] and w.collapse.rollbacks == 1
    np.testing.assert_allclose(w.trainer.model.params.data, before, atol=1e-5)
    assert w._judged is None and w.collapse.watching == 0


def test_an_honest_far_mix_whose_loss_comes_back_is_not_rolled_back() -> None:
    """A model of other classes, mixed 0.7 of the way: the step after it sees the loss of a
    model that has forgotten this peer's classes, far over the bar; SGD brings it back under
    within a step or two (measured 2.03, 1.16, 0.32: the bar is 1.15)."""
    digits = load_dataset("digits")
    X, y = digits.X_train, digits.y_train
    backend = select_backend("cpu")

    def trainer(rows: np.ndarray, seed: int) -> Trainer:
        model = build_model("mlp:64", digits.input_shape, 10, backend, 0)
        return Trainer(model, make_optimizer("sgd", model.params, 0.05), X[rows], y[rows], 32, seed)

    w = TrainingWorker(trainer(np.flatnonzero(y < 3), 1), eval_every=10**9)
    w._running = True
    blamed: list[set[str]] = []
    w.collapse, w.on_collapse = CollapseGuard(10), blamed.append
    far = trainer(np.flatnonzero(y >= 3), 2)
    for _ in range(400):
        far.step()
    _warm(w, 400)
    _honest_mix(w)
    w.mix(far.model.params.data, 0.7, source="far")
    jump = _iteration(w)
    assert jump > w.collapse.floor and w.collapse.watching  # one step alone would roll it back
    for _ in range(RECOVERY):
        _iteration(w)
    assert blamed == [] and w.collapse.rollbacks == 0 and w._judged is None


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
