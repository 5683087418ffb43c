"""`OwnLoopWorker`: a `TrainingWorker` whose steps are the user's (no thread of ours).

The built-in worker runs `Trainer.step()` on its own thread and, between two steps, applies
what the exchange left for it (mixes, outer steps, submitted calls). Here the user's loop takes
the steps, and calls `Swarm.step()` after each optimizer step; that call is this worker's turn:

    count the step -> a round due? check the model, wake the exchange -> held at the
    staleness bound? wait (serving mixes) -> land what is pending -> return

Everything the exchange asks of the model is the base class's, unchanged: snapshots and
distances read the buffer from the exchange's threads (`snapshot_into`, `read`), received
models and a round's result are folded into one pending update (`mix`), and the outer step
waits for the next turn (`request_outer_step`). So the user's thread is the only writer of the
parameters (their optimizer, and this worker's landings between two of their steps), and a
snapshot never sees half a landed mix. It may see half of a user's optimizer step: each value
is then one of two consecutive steps' values, which the average round's delta rule handles
value by value (x <- x + w (mean(y) - sent - m): a value already updated in `sent` is averaged,
one not yet updated is kept whole), so nothing is lost or counted twice.

A turn with nothing pending is a few attribute reads and one clock read
(scripts/bench/compute/swarm_step.py). A landed mix is one pass over the model
(`MixAccumulator.apply_to`) and two read passes (BLAS dots, no temporaries) that check the
pending update before it lands and the model after: an update with NaN or Inf (a peer's bug, an
overflow) is dropped before it lands, logged, and training goes on; a model that is not finite after
a finite update was broken by the loop's own steps, which `DivergedError` says (and the peer stops
serving it). The collapse guard of the built-in loop judges the loss of the step after a mix; the
user's loss is theirs, so it is off here (the finiteness checks stand in for its last line).
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Callable
from typing import Any

import numpy as np
from swarmnode.kernels.backend import array_module, to_numpy
from swarmnode.node.swarm.errors import StepThreadError, SwarmClosedError
from swarmnode.node.train import CheckpointError, DivergedError, TrainingWorker
from swarmnode.node.train.mixing import MixAccumulator, OuterStep

log = logging.getLogger(__name__)

STATE_VERSION = 1


class CheckedMixes(MixAccumulator):
    """The pending update, which can say whether it is finite before it lands."""

    def finite(self) -> bool:
        with self._lock:
            if not self._pending:
                return True
            # acc.acc is finite iff every value is (or the norm passes 1e19: no model survives
            # that either)
            return math.isfinite(self._scale) and _finite(self._acc)


OUTER_CHUNK = 1 << 16  # elements: the outer step's scratch, in cache


class SavedOuterStep(OuterStep):
    """The outer step with its state (anchor, momentum) saved and restored: the swarm's own
    state in `Swarm.state_dict()` and in the checkpoints of `checkpoint_dir`. On the host it
    keeps only that state: the step runs chunk by chunk, with a chunk of scratch where the
    base class keeps a third model-sized buffer (the update d) for good."""

    def reset(self, x: Any) -> None:
        if not isinstance(x, np.ndarray):  # a device array: the base class's three buffers
            super().reset(x)
            return
        self._has_anchor = True
        if self._anchor is None:
            self._anchor, self._m = np.empty_like(x), np.empty_like(x)
        self._anchor[...] = x
        self._m[...] = 0

    def apply(self, x: Any, lr: float, beta: float) -> None:
        """m <- beta m + d;  x <- anchor - lr (d + beta m);  anchor <- x, with d = anchor - x:
        the base class's step, one chunk at a time."""
        if not isinstance(x, np.ndarray) or not self._has_anchor or self._d is not None:
            super().apply(x, lr, beta)
            return
        b, neg_lr = np.float32(beta), np.float32(-lr)
        for lo in range(0, x.size, OUTER_CHUNK):
            hi = lo + OUTER_CHUNK
            a, m, xs = self._anchor[lo:hi], self._m[lo:hi], x[lo:hi]
            d = a - xs  # one chunk
            m *= b
            m += d
            np.multiply(m, b, out=xs)  # x is free scratch: its value is in d and a
            xs += d
            xs *= neg_lr
            xs += a
            a[...] = xs
        self.steps += 1

    def state(self) -> dict[str, Any]:
        if not self._has_anchor:
            return {"outer_steps": self.steps, "outer_anchor": None, "outer_momentum": None}
        return {
            "outer_steps": self.steps,
            "outer_anchor": to_numpy(self._anchor).copy(),
            "outer_momentum": to_numpy(self._m).copy(),
        }

    def load(self, state: dict[str, Any], like: Any) -> None:
        anchor, m = state.get("outer_anchor"), state.get("outer_momentum")
        self.steps = int(state.get("outer_steps", 0))
        if anchor is None or m is None:
            self.forget()
            return
        self.reset(like)  # allocates the buffers on the model's device
        self._anchor[...] = self._xp.asarray(anchor, dtype=np.float32)
        self._m[...] = self._xp.asarray(m, dtype=np.float32)


class OwnLoopWorker(TrainingWorker):
    """The worker of a `Swarm`: `count_step()` then, when it says so, `finish_step()`, both on
    the user's one training thread; everything else as `TrainingWorker`."""

    def __init__(self, trainer: Any, *, device: str, eval_every: int, **kw: Any) -> None:
        super().__init__(trainer, eval_every=eval_every, device=device, **kw)
        params = trainer.model.params.data
        self.mixes = CheckedMixes(array_module(params), int(params.size))
        self.outer = SavedOuterStep(array_module(params))
        if trainer.restored is not None:  # a checkpoint of checkpoint_dir (node resume)
            self.outer.load(trainer.restored, params)
        self.check_model: Callable[[], None] | None = None  # the binding's check
        self.on_broken: Callable[[str], None] | None = None  # stop serving (thread-safe)
        self.mixes_rejected = 0  # pending updates with NaN or Inf, dropped before landing
        self._owner: int | None = None
        self._owner_thread: threading.Thread | None = None
        self._bind_lock = threading.Lock()
        self._broken: BaseException | None = None  # raised again by every later step
        self._last_t = 0.0
        self._win_losses = 0  # steps of the window that reported a loss
        self.landings = 0  # landings and drains (they change the model): `model_version()`

    # --- lifecycle: no thread ------------------------------------------------------------

    def start(self) -> None:
        if self._running or self._finished:
            raise RuntimeError("OwnLoopWorker.start() called twice")
        self._t_start = self._last_t = time.perf_counter()
        with self._lock:
            self._running = True

    def request_stop(self) -> None:
        """End the steps (the swarm closes): what is pending is settled as the built-in
        worker's thread settles it when it ends; later steps raise `SwarmClosedError`."""
        self._stop.set()
        self._unblock.set()  # a user thread held at the bound returns (and then raises)
        with self._lock:  # never in the middle of a landing
            if self._finished:
                return
            with self._params_lock, self._device():
                self._settle()  # the user's model stays what their last step left
        self._announce_end()

    def join(self, timeout: float | None = None) -> bool:
        return self._done.is_set() or not self._running

    # --- the user's turn -----------------------------------------------------------------

    def count_step(self, loss: float | None = None) -> bool:
        """Count one step of the user's; True if `finish_step()` has work (a bound to wait at,
        something to land). Cheap: this is what runs every step."""
        if self._owner != threading.get_ident():
            self._bind()
        if self._finished or self._broken is not None:
            raise self._broken or SwarmClosedError(
                "the swarm is closed: Swarm.step() after close() (or after its peer stopped)"
            )
        now = time.perf_counter()
        trainer = self.trainer
        trainer.step_count += 1
        trainer.samples_seen += trainer.batch_size
        step = trainer.step_count
        self.steps_run += 1
        self._win_steps += 1
        self._win_train_s += now - self._last_t
        self._last_t = now
        if loss is not None:
            self._win_loss += float(loss)
            self._win_losses += 1
        notify = self._notify
        if notify is not None and step >= notify[0]:  # a round is due: it snapshots us
            self._round_due()
        if step % self.eval_every == 0:
            self._refresh()
        limit = self._limit
        return (
            (limit is not None and step >= limit)
            or self.mixes.pending
            or self._outer_pending is not None
            or bool(self._pending)
        )

    def finish_step(self) -> None:
        """Wait at the staleness bound (the wait shows in `utilization()`), then land what is
        pending, before the user's next step starts."""
        if self._held():
            self._wait_at_limit()  # serves submits and lands mixes meanwhile
            if self._finished:
                raise SwarmClosedError("the swarm was closed while this step waited for it")
        self._land()
        self._last_t = time.perf_counter()  # the landing is not the user's step time

    def model_version(self) -> tuple[int, int]:
        """What identifies the model between two turns: the steps counted and the turns that
        landed something. Two snapshots of one version are both a state between step s and
        s + 1 of the user's loop (a snapshot may see part of their optimizer step anyway), so
        the exchange may answer with the frame of one still in flight (WorkerStore)."""
        return self.trainer.step_count, self.landings

    def report(self, test_loss: float, test_acc: float) -> None:
        """The user's own evaluation, shown as this peer's (status, page, member meta)."""
        self._refresh(float(test_loss), float(test_acc), self.trainer.step_count)

    def _bind(self) -> None:
        """The first step names the training thread; a step from any other is refused while
        that one lives (a loop that moves to a new thread once the old one ended may)."""
        me = threading.current_thread()
        with self._bind_lock:
            owner = self._owner_thread
            if owner is None or not owner.is_alive():
                self._owner, self._owner_thread = me.ident, me
                return
        raise StepThreadError(
            f"Swarm.step() was called from thread {me.name!r}, but this swarm's steps are "
            f"taken on thread {owner.name!r}: call step() from the one thread that runs "
            "the optimizer (two threads updating one model race each other; one Swarm per "
            "model and thread)"
        )

    def _round_due(self) -> None:
        if self.check_model is not None:
            try:
                self.check_model()
            except Exception as exc:
                self._break(exc)
                raise
        self._fire_notify()

    def _refresh(self, *evaluation: Any) -> None:
        """New metrics from the window (and an evaluation: test loss, accuracy, step)."""
        # the base class divides the window's loss by its steps: by those that gave a loss
        given = self._win_losses
        self._win_loss = self._win_loss * self._win_steps / given if given else float("nan")
        self._metrics = self._make_metrics_now(*evaluation)
        self._win_loss, self._win_steps, self._win_train_s = 0.0, 0, 0.0
        self._win_losses = 0

    def _break(self, exc: BaseException) -> None:
        """The model no longer is what the swarm exchanges (or it diverged): stop serving it,
        and say so at every later step; `close()` still leaves cleanly."""
        self._broken = exc
        if self.on_broken is not None:
            self.on_broken(str(exc))

    # --- landing -------------------------------------------------------------------------

    def _drain_pending(self) -> None:
        self.landings += 1  # a submitted call may write the model (a state sync's load)
        super()._drain_pending()

    def _apply_mixes(self) -> None:
        """Pending mixes, checked finite first, then a pending outer step (the user's thread,
        under the locks, between two of their steps)."""
        self.landings += 1  # under the parameter lock: a snapshot is wholly of one version
        x = self.trainer.model.params.data
        landed = True
        if self.mixes.pending:
            if not self.mixes.finite():
                landed = False
                self._reject(x)
            elif self.mixes.apply_to(x):
                self._last_mix_step = self.trainer.step_count
                if not _finite(x):  # a finite update on a finite model stays finite
                    self._diverged()
        with self._outer_lock:
            pending, self._outer_pending = self._outer_pending, None
        if pending is not None and landed:
            self.outer.apply(x, *pending)

    def _reject(self, x: Any) -> None:
        sources = self.mixes.take_sources()
        self.mixes.discard()
        self.mixes_rejected += 1
        if not _finite(x):  # the round's update carries our own NaN along: not the mix's
            self._diverged()
        log.warning(
            "a mix %s held NaN or Inf: dropped before it landed (%d so far); training goes on",
            f"of models pushed by {', '.join(sorted(sources))}" if sources else "of my round",
            self.mixes_rejected,
        )

    def _diverged(self) -> None:
        exc = DivergedError(
            f"training diverged: the model's parameters hold NaN or Inf at step "
            f"{self.trainer.step_count}, and the swarm's mixes are checked before they land: "
            "the loop's own steps did it; this peer stops serving its model (restart from a "
            "checkpoint with a smaller lr)"
        )
        self._break(exc)
        raise exc

    # --- the swarm's own state -----------------------------------------------------------

    def state(self) -> dict[str, Any]:
        """The swarm's own state (no parameters: they are the user's, in their checkpoint)."""
        with self._lock, self._device():
            t = self.trainer
            return {
                "version": STATE_VERSION,
                "step": int(t.step_count),
                "samples_seen": int(t.samples_seen),
                "size": int(t.model.params.size),
                **self.outer.state(),
            }

    def load_state(self, state: dict[str, Any]) -> None:
        """Restore `state()`: the outer step, and the step counter unless the swarm's (taken
        at the join) is further on: a counter never goes back."""
        check_state(state, int(self.trainer.model.params.size))
        with self._lock, self._params_lock, self._device():
            t = self.trainer
            t.step_count = max(int(t.step_count), int(state["step"]))
            t.samples_seen = max(int(t.samples_seen), int(state.get("samples_seen", 0)))
            self.outer.load(state, t.model.params.data)


def _finite(v: Any) -> bool:
    # one BLAS pass and no temporary, as node/train/model/user_model.py checks a user's vector
    return math.isfinite(float(v.dot(v)))


def check_state(state: Any, size: int) -> None:
    """A swarm state of `state()`'s form, for a model of `size` values (CheckpointError)."""
    if not isinstance(state, dict) or state.get("version") != STATE_VERSION:
        raise CheckpointError("not a swarm state (Swarm.state_dict() of this swarmnode)")
    step = state.get("step")
    if isinstance(step, bool) or not isinstance(step, int | np.integer) or step < 0:
        raise CheckpointError(f"swarm state 'step' must be an int >= 0, got {step!r}")
    if state.get("size") != size:
        raise CheckpointError(
            f"the swarm state is of a model of {state.get('size')} values, this one has {size}"
        )
    for key in ("outer_anchor", "outer_momentum"):
        v = state.get(key)
        if v is not None and (np.shape(v) != (size,) or not np.isfinite(v).all()):
            raise CheckpointError(f"swarm state {key!r} is not {size} finite values")
