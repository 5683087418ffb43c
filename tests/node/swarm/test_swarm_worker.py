"""The worker of a loop that is the user's (node/swarm/own_worker.py), without a network: the
landing rule (in place, the user's steps kept), the staleness bound, the checks that keep a NaN
from landing, the one-thread rule, and the swarm's own state."""

from __future__ import annotations

import contextlib
import logging
import threading

import numpy as np
import pytest
from swarmnode.node.swarm.binding import bind_vector
from swarmnode.node.swarm.errors import ModelChangedError, StepThreadError, SwarmClosedError
from swarmnode.node.swarm.own_node import OwnLoopTrainer
from swarmnode.node.swarm.own_worker import OwnLoopWorker
from swarmnode.node.train.errors import CheckpointError, DivergedError

from tests.waiting import wait_for

pytestmark = pytest.mark.timeout(30)


def _worker(x: np.ndarray, eval_every: int = 10**9) -> OwnLoopWorker:
    w = OwnLoopWorker(OwnLoopTrainer(bind_vector(x), 1), device="cpu", eval_every=eval_every)
    w.start()
    return w


def _step(w: OwnLoopWorker) -> None:
    if w.count_step():
        w.finish_step()


def test_a_step_with_nothing_pending_only_counts():
    x = np.ones(5, np.float32)
    w = _worker(x)
    assert w.count_step() is False
    assert w.trainer.step_count == 1 and w.steps_run == 1
    np.testing.assert_array_equal(x, 1.0)


def test_a_mix_lands_in_place_at_the_next_step():
    x = np.zeros(4, np.float32)
    w = _worker(x)
    buffer = x.__array_interface__["data"][0]
    w.mix(np.full(4, 2.0, np.float32), 0.5)  # x <- (1 - w) x + w y, between two steps
    np.testing.assert_array_equal(x, 0.0)  # not before the user's step ends
    assert w.count_step() is True
    w.finish_step()
    np.testing.assert_array_equal(x, 1.0)
    assert x.__array_interface__["data"][0] == buffer  # the model's own memory, no copy


def test_the_delta_rule_keeps_the_steps_the_user_took_while_the_round_was_in_flight():
    x = np.zeros(3, np.float32)
    w = _worker(x)
    sent = w.snapshot()[1]  # the round starts from a snapshot
    for _ in range(4):  # the user's loop trains on meanwhile: +1 a step
        x += 1.0
        _step(w)
    answer = np.full(3, 10.0, np.float32)  # the partner's model
    # what delta_rule.land nudges: x <- x + w (mean(y) - sent), with mean(y) = answer here
    w.mix(answer - sent, 0.5, additive=True)
    _step(w)
    # (sent + answer) / 2 plus the 4 steps trained during the round, kept whole
    np.testing.assert_allclose(x, 5.0 + 4.0)


def test_the_outer_step_follows_the_mix_in_the_same_landing():
    x = np.zeros(2, np.float32)
    w = _worker(x)
    w.request_outer_step(0.7, 0.5)  # the first one sets the anchor: x unchanged
    _step(w)
    x += 1.0  # a user step
    w.mix(np.full(2, 3.0, np.float32), 0.5)  # x: 1 -> 2
    w.request_outer_step(1.0, 0.0)  # lr 1, no momentum: exactly the mix
    _step(w)
    np.testing.assert_allclose(x, 2.0)
    assert w.outer.steps == 1


def test_a_mix_with_nan_is_dropped_before_it_lands_and_training_goes_on(caplog):
    x = np.ones(4, np.float32)
    w = _worker(x)
    bad = np.ones(4, np.float32)
    bad[2] = np.nan
    caplog.set_level(logging.WARNING)
    w.mix(bad, 0.5, source="liar")
    w.request_outer_step(0.7, 0.5)  # the round's outer step goes with its mix
    _step(w)
    np.testing.assert_array_equal(x, 1.0)  # rolled back: it never landed
    assert w.mixes_rejected == 1 and not w.mixes.pending
    assert "pushed by liar held NaN or Inf: dropped" in caplog.text
    w.mix(np.full(4, 3.0, np.float32), 0.5)  # the next, finite one lands
    _step(w)
    np.testing.assert_array_equal(x, 2.0)


def test_a_model_that_diverged_itself_stops_serving_and_every_later_step_says_so():
    x = np.ones(4, np.float32)
    w = _worker(x)
    broken: list[str] = []
    w.on_broken = broken.append
    x[0] = np.inf  # the user's own loop diverged
    w.mix(np.ones(4, np.float32), 0.5)  # any round now carries the Inf along
    with pytest.raises(DivergedError, match="the loop's own steps did it"):
        _step(w)
    assert broken and "NaN or Inf" in broken[0]
    with pytest.raises(DivergedError):
        _step(w)


def test_a_round_due_checks_the_model_first_and_a_changed_one_stops_the_swarm():
    x = np.zeros(3, np.float32)
    w = _worker(x)
    fired, broken = [], []
    w.notify_at(2, lambda: fired.append(w.trainer.step_count))
    w.on_broken = broken.append

    def check() -> None:
        if w.trainer.step_count >= 4:
            raise ModelChangedError("parameter 'fc' no longer views the swarm's buffer")

    w.check_model = check
    _step(w)
    _step(w)
    assert fired == [2]  # the exchange is woken at its target step, from the user's step
    w.notify_at(4, lambda: fired.append(4))
    _step(w)
    with pytest.raises(ModelChangedError, match="'fc' no longer views"):
        _step(w)
    assert fired == [2] and broken  # no round from a broken binding; serving stopped
    with pytest.raises(ModelChangedError):
        _step(w)


def test_a_step_from_a_second_thread_is_refused_by_name():
    w = _worker(np.zeros(2, np.float32))
    _step(w)
    errors: list[BaseException] = []

    def other() -> None:
        try:
            _step(w)
        except StepThreadError as exc:
            errors.append(exc)

    t = threading.Thread(target=other, name="data-loader")
    t.start()
    t.join()
    assert errors and "thread 'data-loader'" in str(errors[0])
    assert "MainThread" in str(errors[0])
    assert w.trainer.step_count == 1  # the refused call counted nothing


def test_a_loop_that_moves_to_a_new_thread_once_the_old_one_ended_may():
    w = _worker(np.zeros(2, np.float32))
    first = threading.Thread(target=_step, args=(w,))
    first.start()
    first.join()
    _step(w)  # the first thread is gone: this one takes over
    assert w.trainer.step_count == 2


def test_at_the_staleness_bound_the_step_waits_serving_mixes_and_the_wait_shows():
    x = np.zeros(2, np.float32)
    w = _worker(x)
    w.set_step_limit(2)
    done = threading.Event()

    def user_loop() -> None:
        _step(w)
        _step(w)  # step 2 reaches the bound: held here until the next round ends
        done.set()

    t = threading.Thread(target=user_loop)
    t.start()
    wait_for(lambda: w._held_since is not None, 10, "held at the bound")
    w.mix(np.full(2, 4.0, np.float32), 0.5)  # the round's mix lands while held
    wait_for(lambda: x[0] == 2.0, 10, "mix landed while held")
    assert not done.is_set()
    w.set_step_limit(None)  # the round ended: released
    t.join(10)
    assert done.is_set() and w.waited_s > 0 and w.utilization() < 1.0


def test_after_close_a_step_is_refused_and_pending_mixes_are_dropped():
    x = np.zeros(2, np.float32)
    w = _worker(x)
    w.mix(np.ones(2, np.float32), 0.5)
    w.request_stop()
    assert w.join(0) and not w.running
    np.testing.assert_array_equal(x, 0.0)  # the model stays what the last step left
    with pytest.raises(SwarmClosedError, match="after close"):
        _step(w)


def test_the_swarm_state_round_trips_and_its_counter_never_goes_back():
    x = np.zeros(3, np.float32)
    w = _worker(x)
    w.request_outer_step(0.7, 0.5)
    for _ in range(5):
        x += 1.0
        _step(w)
    w.request_outer_step(0.7, 0.5)
    _step(w)
    state = w.state()
    assert state["step"] == 6 and state["outer_steps"] == 1
    assert "params" not in state  # the parameters are the user's

    y = np.zeros(3, np.float32)
    v = _worker(y)
    v.load_state(state)
    assert v.trainer.step_count == 6 and v.outer.steps == 1
    np.testing.assert_array_equal(v.outer.back(), w.outer.back())
    v.trainer.step_count = 50  # the swarm's counter, taken at the join
    v.load_state(state)
    assert v.trainer.step_count == 50


@pytest.mark.parametrize(
    ("change", "says"),
    [({"size": 4}, "model of 4 values"), ({"step": -1}, "'step'"), ({"version": 9}, "not a")],
)
def test_a_state_of_another_model_is_refused(change, says):
    w = _worker(np.zeros(3, np.float32))
    with pytest.raises(CheckpointError, match=says):
        w.load_state({**w.state(), **change})


def test_the_loss_given_to_step_is_the_metrics_loss_and_none_given_is_nan():
    w = _worker(np.zeros(2, np.float32), eval_every=4)
    for loss in (1.0, 3.0, None, 2.0):
        if w.count_step(loss):
            w.finish_step()
    assert w.metrics().loss == pytest.approx(2.0) and w.metrics().step == 4
    for _ in range(4):
        _step(w)
    assert np.isnan(w.metrics().loss)
    w.report(0.5, 0.9)
    assert w.metrics().test_acc == 0.9 and w.metrics().eval_step == 8


def test_a_mix_landed_while_held_at_the_bound_lands_on_the_model_s_device():
    # cupy's current device is per thread: a landing on the user's thread must enter the
    # model's device context (as finish_step's does), or --device cuda:1 lands on device 0
    x = np.zeros(2, np.float32)
    w = _worker(x)
    inside = threading.local()

    @contextlib.contextmanager
    def on_device():
        inside.depth = getattr(inside, "depth", 0) + 1
        try:
            yield
        finally:
            inside.depth -= 1

    landed_on_device: list[bool] = []
    apply = w._apply_mixes

    def recorded() -> None:
        landed_on_device.append(getattr(inside, "depth", 0) > 0)
        apply()

    w.trainer.on_device = on_device
    w._apply_mixes = recorded
    w.set_step_limit(1)
    t = threading.Thread(target=lambda: _step(w))  # step 1 reaches the bound: held
    t.start()
    wait_for(lambda: w._held_since is not None, 10, "held at the bound")
    w.mix(np.full(2, 4.0, np.float32), 0.5)
    wait_for(lambda: x[0] == 2.0, 10, "mix landed while held")
    w.set_step_limit(None)
    t.join(10)
    assert not t.is_alive() and landed_on_device and all(landed_on_device)
