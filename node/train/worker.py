"""`TrainingWorker`: a background thread that owns a `Trainer` and steps it.

How the asyncio peer trains without blocking its event loop. The thread is the only code that
touches the model; everyone else talks to it through a thread-safe API:

- `snapshot()` — a host copy of the flat parameters, taken between two steps; `read(fn)` —
  fn(parameters) between two updates, without a copy (a distance);
- `mix(other, w)` — x <- (1 - w) x + w other, folded at once into one pending update
  (`swarmnode.node.train.mixing.mixes.MixAccumulator`) that the thread applies between two steps;
- `submit(fn)` — run `fn(params.data)` on the training thread between two steps (load received
  parameters) and get its result through a `concurrent.futures.Future`;
- `state()` — a full checkpoint state, also taken between two steps;
- `metrics()` — the latest counters, cheap to call often (a status route, a progress line);
- `set_throttle()` — slow this peer down on purpose (tests, chaos scenarios), or pace it as a
  compute-bound peer (`step_s`: every step takes at least that long);
- `set_step_limit(n)` — take no step past step `n` until a new limit (the exchange's bounded
  staleness: a peer may not run far ahead of its last round); `waited_s` / `utilization()` say
  how much of the thread's time that waiting took;
- `lr_scale` — a `SwarmLR` (replace it to pick a rule; `set_size(n)` from any thread): the
  trainer's peak lr scaled with the swarm size (or its measured gain), per step; the trainer
  multiplies in its schedule on the step counter (`Trainer.lr_at`).

Per step the thread takes one lock once (a few hundred ns, uncontended but for a state); snapshots
take only a second one, held while the parameters change (`Trainer.update_lock`), not a whole step.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any

import numpy as np
from swarmnode.kernels.backend import array_module
from swarmnode.node.train.errors import DivergedError
from swarmnode.node.train.lr import SwarmLR
from swarmnode.node.train.metrics import CheckpointCallback, EvalCallback, WorkerMetrics
from swarmnode.node.train.mixing import CollapseGuard, MixAccumulator, OuterStep, dead_fraction
from swarmnode.node.train.pacing import Pacer
from swarmnode.node.train.trainer import Trainer

log = logging.getLogger(__name__)

# A NaN/Inf loss this soon after a mix is blamed on the mixed-in model, not on this peer's lr.
MIX_BLAME_STEPS = 50
CALM_EVERY = 10  # steps between two looks at the dead units of a calm step (collapse guard)
TRAIN_THREAD = "swarmnode-train"  # the training thread's name (the CLI looks for it at exit)
HELD_POLL_S = 0.1  # a thread held at the step limit re-checks this often (a missed wake-up)


class TrainingWorker:
    """Steps `trainer` on a thread until `stop()` or until `trainer.step_count == max_steps`."""

    def __init__(
        self,
        trainer: Trainer,
        *,
        X_test: np.ndarray | None = None,
        y_test: np.ndarray | None = None,
        eval_every: int = 100,
        max_steps: int | None = None,
        device: str = "cpu",
        on_eval: EvalCallback | None = None,
        on_checkpoint: CheckpointCallback | None = None,
        checkpoint_every: int = 0,
        on_done: Callable[[], None] | None = None,
    ) -> None:
        if eval_every < 1:
            raise ValueError(f"eval_every must be >= 1, got {eval_every}")
        self.trainer = trainer
        self.eval_every = eval_every
        self.max_steps = max_steps
        self.device = device
        self.checkpoint_every = checkpoint_every
        self._on_eval = on_eval
        self._on_checkpoint = on_checkpoint
        self._on_done = on_done  # called on the thread when it ends: lets asyncio await it
        self._has_test = X_test is not None and y_test is not None and len(y_test) > 0
        self._X_test = trainer._to_device(X_test) if self._has_test else None  # once, not per eval
        self._y_test = trainer._to_device(y_test) if self._has_test else None

        self._lock = threading.Lock()  # held by the thread for each step; by others for states
        trainer.update_lock = self._params_lock = threading.Lock()  # param changes; snapshots
        self._stop = threading.Event()
        self._wake = threading.Event()  # ends a throttle pause early: stop, or a new throttle
        self._done = threading.Event()
        self._pending: deque[tuple[Callable[[Any], Any], Future[Any]]] = deque()
        params = trainer.model.params.data
        self.mixes = MixAccumulator(array_module(params), int(params.size))
        self.outer = OuterStep(array_module(params))
        self._outer_pending: tuple[float, float] | None = None  # (lr, momentum) to apply
        self._outer_lock = threading.Lock()  # guards _outer_pending and _notify
        self._notify: tuple[int, Callable[[], None]] | None = None
        self._limit: int | None = None  # no step starts at or past it (None: no limit)
        self._unblock = threading.Event()  # wakes a thread held at the limit: work or release
        self.waited_s = 0.0  # held at the step limit, in total (the current wait not yet)
        self._held_since: float | None = None  # the current wait's start
        self._last_mix_step: int | None = None  # the step before which a mix was last applied
        # the collapse guard (node/train/mixing/collapse.py): None, off; set by the node
        self.collapse: CollapseGuard | None = None
        # called on the training thread with the senders of a rolled-back mix (thread-safe!)
        self.on_collapse: Callable[[set[str]], None] | None = None
        self._premix: Any = None  # what the mixes being judged changed (one model, reused)
        self._judged: set[str] | None = None  # their pushers; None: no mix is being judged
        self._fresh = False  # one of them landed since the last step
        self.mixes_dropped = 0  # received after the last step: not in the reported model
        self._finished = False
        self._running = False
        self._thread: threading.Thread | None = None
        self.error: BaseException | None = None

        self.pacer = Pacer(self._wake)
        self.lr_scale = SwarmLR()  # rule "none": the base lr, unless the peer sets another
        self._t_start = 0.0
        self._end_elapsed: float | None = None  # the thread's life, once it ended
        # Window since the last evaluation, for loss and throughput.
        self._win_loss = 0.0
        self._win_steps = 0
        self._win_train_s = 0.0
        # Totals over this worker's life (the run summary's throughput).
        self.steps_run = 0
        self.train_seconds = 0.0
        self._metrics = self._make_metrics(float("nan"), float("nan"), float("nan"), -1, 0.0)

    # --- lifecycle -----------------------------------------------------------------------

    def start(self) -> None:
        if self._thread is not None:
            raise RuntimeError("TrainingWorker.start() called twice")
        self._t_start = time.perf_counter()
        with self._lock:
            self._running = True
        self._thread = threading.Thread(target=self._run, name=TRAIN_THREAD, daemon=True)
        self._thread.start()

    def request_stop(self) -> None:
        """Ask the thread to stop after the current step; returns at once (signal-handler safe)."""
        self._stop.set()
        self._wake.set()
        self._unblock.set()

    def stop(self, timeout: float | None = None) -> bool:
        """Stop and join. True if the thread has ended (False: still busy after `timeout`)."""
        self.request_stop()
        return self.join(timeout)

    def join(self, timeout: float | None = None) -> bool:
        """Wait for the thread to end by itself (step budget, error, or a stop request)."""
        if self._thread is None:
            return True
        self._done.wait(timeout)
        return self._done.is_set()

    @property
    def running(self) -> bool:
        return self._running

    # --- thread-safe access --------------------------------------------------------------

    def snapshot(self) -> tuple[int, np.ndarray]:
        """(step, host copy of the flat parameters), never taken in the middle of a step."""
        out = np.empty(self.trainer.model.params.data.size, dtype=np.float32)
        return self.snapshot_into(out), out

    def snapshot_into(self, out: np.ndarray) -> int:
        """Copy the parameters into `out` (host float32, e.g. a frame's payload); their step."""
        with self._params_lock, self._device():  # waits for an update, not a whole step
            params = self.trainer.model.params.data
            if isinstance(params, np.ndarray):
                np.copyto(out, params)
            else:  # a device array: one device-to-host copy straight into `out`
                params.get(out=out)
            return self.trainer.step_count

    def read(self, fn: Callable[[np.ndarray], Any]) -> Any:
        """fn(flat parameters), between two updates, without a copy of them (a distance to a
        received model: one pass instead of a snapshot copy and a pass). `fn` must only read.
        A device model is copied to the host first, as a snapshot (cupy: one transfer)."""
        with self._params_lock, self._device():  # waits for an update, not a whole step
            params = self.trainer.model.params.data
            if isinstance(params, np.ndarray):
                return fn(params)
        return fn(self.snapshot()[1])

    def state(self) -> dict[str, Any]:
        """A checkpoint state (`Trainer.state()`), taken between two steps."""
        with self._lock, self._device():
            return self.trainer.state()

    def submit(self, fn: Callable[[Any], Any]) -> Future[Any]:
        """Run `fn(params.data)` on the training thread between two steps.

        `fn` may modify the parameters in place. If the worker is not running (not started, or
        finished), `fn` runs right here under the same lock, so it is never lost and still never
        overlaps a step.
        """
        fut: Future[Any] = Future()
        with self._lock:
            if self._running:
                self._pending.append((fn, fut))
                self._unblock.set()  # a thread held at the step limit serves it at once
                return fut
            with self._params_lock, self._device():
                self._call(fn, fut)
        return fut

    def mix(
        self,
        other: Any,
        weight: float,
        *,
        additive: bool = False,
        source: str = "",
        moved: Any = None,
    ) -> None:
        """x <- (1 - weight) x + weight other (`additive`: x <- x + weight other, a compressed
        exchange's gossip step), applied between two steps; returns once folded
        into the pending update (tens of ms per 100 MB, never a whole training step). Before the
        thread starts, it is applied here and now; once training has ended it is dropped (and
        counted): the model's last evaluation, which the summary reports, must stay true.
        `moved`: my round in flight's count of what pushes moved me (the delta rule's m),
        which this mix's move is added to, read against the model under its update lock."""
        if self._finished:
            self.mixes_dropped += 1
            return
        with self._device():
            if additive:
                self.mixes.nudge(other, weight)
            elif moved is None:
                self.mixes.add(other, weight, source)
            else:
                with self._params_lock:
                    x = self.trainer.model.params.data
                    self.mixes.add(other, weight, source, x=x, moved=moved)
        self._unblock.set()  # a thread held at the step limit applies it at once
        # No lock to look: the thread sets _running False and then settles what is pending,
        # under the lock, so a fold seen as "running" here is settled by it at the latest then.
        if not self._running:
            with self._lock, self._params_lock, self._device():
                if self._finished:  # training ended between the check above and the fold
                    if self.mixes.pending:
                        self.mixes_dropped += 1
                    self.mixes.discard()
                else:  # not started yet
                    self.mixes.apply_to(self.trainer.model.params.data)

    def notify_at(self, step: int, callback: Callable[[], None]) -> None:
        """Call `callback` (from the training thread, so it must be thread-safe and cheap) once
        the step counter reaches `step`, or when training ends. One waiter at a time: a later
        call replaces an earlier one. This is what paces the exchange: it used to poll the
        counter every 20 ms, which at full speed let 20-40 steps pass between two rounds."""
        with self._outer_lock:
            self._notify = (step, callback)
        if self.trainer.step_count >= step or self._finished:
            self._fire_notify(force=True)

    def _fire_notify(self, force: bool = False) -> None:
        with self._outer_lock:
            pending = self._notify
            if pending is None or not (force or self.trainer.step_count >= pending[0]):
                return
            self._notify = None
        pending[1]()

    def request_outer_step(self, lr: float, momentum: float) -> None:
        """Apply `OuterStep` after every mix folded so far, between two steps (called from the
        store's fold thread, after the round's mix: its FIFO order puts the step after it)."""
        with self._outer_lock:  # not the training lock: a fold must never wait for a step
            self._outer_pending = (float(lr), float(momentum))
        self._unblock.set()

    def set_step_limit(self, limit: int | None) -> None:
        """Take no step while the step counter is at or past `limit` (None: no limit).

        The exchange's bounded staleness: after each round the peer allows itself a bounded
        number of steps, so a peer faster than its network waits for its next round instead
        of training alone. While held, the thread still serves `submit`, mixes and outer steps
        (a round may wait for them), and wakes at once on a new limit or a stop."""
        self._limit = None if limit is None else int(limit)
        self._unblock.set()

    def utilization(self) -> float:
        """The share of the training thread's time spent training (steps, evaluations, the
        pacing of `set_throttle`), not held at the step limit: 1.0 when the compute sets the
        pace, lower when the exchange (the network) does."""
        now = time.perf_counter()
        elapsed = (now - self._t_start) if self._t_start else 0.0
        if self._end_elapsed is not None:
            elapsed = self._end_elapsed
        since = self._held_since  # read once: the thread may end the wait meanwhile
        waited = self.waited_s + (now - since if since is not None else 0.0)
        return 1.0 - min(1.0, waited / elapsed) if elapsed > 0 else 1.0

    def set_throttle(
        self, delay_s: float = 0.0, slowdown: float = 1.0, step_s: float = 0.0
    ) -> None:
        """Pause after each step (`node.train.pacing.Pacer`); all defaults: full speed."""
        self.pacer.set(delay_s, slowdown, step_s)

    def metrics(self) -> WorkerMetrics:
        return self._metrics

    # --- the thread ----------------------------------------------------------------------

    def _device(self) -> contextlib.AbstractContextManager[Any]:
        """The model's device made current on the calling thread: cupy's current device is
        per thread, so without this `--device cuda:1` would compute on device 0 from here."""
        on_device = getattr(self.trainer, "on_device", None)  # test doubles may lack it
        return on_device() if on_device is not None else contextlib.nullcontext()

    def _run(self) -> None:
        try:
            with self._device():
                self._loop()
        except BaseException as exc:  # reported through .error; the thread must not die silently
            self.error = exc
            log.debug("training thread stopped by %s", exc)
        finally:
            with self._lock, self._params_lock, self._device():
                self._settle()
            self._announce_end()

    def _settle(self) -> None:
        """The steps are over: what is pending is settled (under `_lock`, `_params_lock`, on
        the model's device). Mixes that arrived after the last step are dropped, not applied:
        the summary must describe the model whose evaluation the last progress line printed."""
        self._running = False
        self._finished = True
        self._drain_pending()
        if self.mixes.pending:
            self.mixes_dropped += 1
            self.mixes.discard()
        self._outer_pending = None

    def _announce_end(self) -> None:
        """The final metrics, then everyone waiting on the end is told (no lock held)."""
        self._end_elapsed = time.perf_counter() - self._t_start
        self._metrics = self._make_metrics_now()
        self._fire_notify(force=True)
        self._done.set()
        if self._on_done is not None:
            self._on_done()

    def _loop(self) -> None:
        trainer = self.trainer
        while not self._stop.is_set() and not self._budget_reached():
            if self._held():
                self._wait_at_limit()
                continue
            t0 = time.perf_counter()
            with self._lock:
                loss = self._turn()
            dt = time.perf_counter() - t0
            self._win_loss += loss
            self._win_steps += 1
            self._win_train_s += dt
            self.steps_run += 1
            self.train_seconds += dt
            step = trainer.step_count
            if self._notify is not None and step >= self._notify[0]:  # racy read, rechecked
                self._fire_notify()
            if step % self.eval_every == 0 or self._budget_reached():
                self._evaluate()
            if self._on_checkpoint is not None and self.checkpoint_every:
                if step % self.checkpoint_every == 0:
                    self._on_checkpoint(trainer.state())
            self.pacer.pause(dt)

    def _turn(self) -> float:
        """One turn of the loop (under `_lock`): what is pending, one step, and the collapse
        guard's judgement of the mixes that step saw."""
        with self._params_lock:
            if self._pending:
                self._drain_pending()
            self._apply_mixes()
        loss = self._step()  # takes _params_lock for its update (Trainer.update_lock)
        if self.collapse is not None:
            self._guard_collapse(loss)
        return loss

    def _held(self) -> bool:
        limit = self._limit
        return limit is not None and self.trainer.step_count >= limit

    def _wait_at_limit(self) -> None:
        """Held at the step limit: serve submits, mixes and outer steps until released (the
        collapse guard judges the mixes applied meanwhile at the next step, all together)."""
        t0 = self._held_since = time.perf_counter()
        while self._held() and not self._stop.is_set():
            self._land()
            # the timeout only bounds a missed wake-up; every release sets the event
            self._unblock.wait(HELD_POLL_S)
            self._unblock.clear()
        self.waited_s += time.perf_counter() - t0
        self._held_since = None

    def _land(self) -> None:
        """What is pending, then the mixes, between two steps, on the model's device: the one
        way every wait or turn outside `_turn` lands them. The device is entered here, not
        left to the caller: cupy's current device is per thread, and a `Swarm` lands on the
        user's thread (OwnLoopWorker), which never entered it."""
        with self._lock, self._params_lock, self._device():
            if self._pending:
                self._drain_pending()
            self._apply_mixes()

    def _apply_mixes(self) -> None:
        """Pending mixes, then a pending outer step (under the lock, between two steps). With
        the collapse guard on, what the mixes changed since the guard's last verdict is kept
        (`_premix`, the outer step's change left out) and the senders of the pushed models
        among them gathered in `_judged` (an empty set: a round's own mixes): the next steps
        judge them, until the guard passes them or rolls them back."""
        x = self.trainer.model.params.data
        guarded = self.collapse is not None and self.mixes.pending
        if guarded:
            if self._premix is None:
                self._premix = array_module(x).empty_like(x)
            if self._judged is None:  # premix <- -x before the first mix since the last verdict
                array_module(x).negative(x, out=self._premix)
            else:  # premix holds (what the earlier mixes changed); minus x now: -x before them
                self._premix -= x
        sources = self.mixes.take_sources() if guarded else set()
        if self.mixes.apply_to(x):
            self._last_mix_step = self.trainer.step_count
            if guarded:  # premix <- x after - x before (the earlier mixes' change included)
                self._premix += x
                self._judged = (self._judged or set()) | sources
                self._fresh = True
        elif guarded and self._judged is not None:  # nothing applied: undo the subtraction
            self._premix += x
        with self._outer_lock:
            pending, self._outer_pending = self._outer_pending, None
        if pending is not None:
            self.outer.apply(x, *pending)

    def _guard_collapse(self, loss: float) -> None:
        """Judge a step after mixes (`_judged`: the senders of the pushed models in them, empty
        for a round's own) until the guard's verdict; roll them back on a collapse and name
        their pushers. Calm steps teach the guard the usual dead share."""
        assert self.collapse is not None
        judged = self._judged
        if judged is None:
            if self.trainer.step_count % CALM_EVERY == 0:
                self.collapse.calm(self._dead_share())
            return
        fresh, self._fresh = self._fresh, False
        why = self.collapse.judge(loss, self._dead_share(), fresh)
        if why is None and self.collapse.watching:
            return  # the verdict waits: later mixes join these in `_premix` and `_judged`
        self._judged = None
        if why is None:
            return
        with self._params_lock:
            self.trainer.model.params.data[...] -= self._premix
        self.outer.forget()  # its anchor and momentum were about the mixed model
        # and so was the optimizer's heading (the guard runs in the built-in loop only, with
        # swarmnode's optimizer): kept, a liar caught at step 1 (classifier x -20) still carried
        # accuracy 0.96 -> 0.25 over the next ten steps, 0.90 with it dropped
        self.trainer.optimizer.forget_heading()
        self.collapse.rollbacks += 1
        log.warning(
            "a mix %s rolled back: %s%s (%d rollbacks so far)",
            f"of models pushed by {', '.join(sorted(judged))}" if judged else "of my own round",
            why,
            "; their pushes are not mixed for a while" if judged else "",
            self.collapse.rollbacks,
        )
        if judged and self.on_collapse is not None:
            self.on_collapse(judged)

    def _dead_share(self) -> float | None:
        """The hidden units dead in the last forward pass; None for a model that does not show
        its layers (a user's model, node/train/model/user_model.py: the guard judges its loss only)."""
        return dead_fraction(getattr(self.trainer.model, "layers", ()))

    def _step(self) -> float:
        """One training step; a divergence soon after a mix says that the mix is the likely
        cause (a smaller --lr is the wrong advice when a peer served a poisoned model)."""
        if self.lr_scale.rule != "none":  # the trainer sets the lr: peak x scale x schedule
            self.trainer.lr_scale = self.lr_scale.advance()
            self.trainer.grad_probe = self.lr_scale.probe  # adaptive, in a swarm: measure
        try:
            return self.trainer.step()
        except DivergedError as exc:
            since = self._last_mix_step
            step = self.trainer.step_count
            if since is None or step - since > MIX_BLAME_STEPS:
                raise
            raise DivergedError(
                f"training diverged: loss is not finite at step {step + 1}, {step - since} "
                "step(s) after mixing in a model received from the swarm: most likely a peer "
                "served a poisoned or diverged model (run with --exchange robust to resist "
                "that); a smaller --lr helps only if the whole swarm diverges"
            ) from exc

    def _budget_reached(self) -> bool:
        return self.max_steps is not None and self.trainer.step_count >= self.max_steps

    def _evaluate(self) -> None:
        if self._has_test:
            with self._lock:
                test_loss, test_acc = self.trainer.evaluate(self._X_test, self._y_test)
        else:
            test_loss, test_acc = float("nan"), float("nan")
        self._metrics = self._make_metrics_now(test_loss, test_acc, self.trainer.step_count)
        self._win_loss, self._win_steps, self._win_train_s = 0.0, 0, 0.0
        if self._on_eval is not None:
            self._on_eval(self._metrics)

    def evaluate_now(self) -> WorkerMetrics:
        """Evaluate on the test split from any thread (between two steps); updates metrics()."""
        if self._has_test:
            with self._lock, self._device():
                test_loss, test_acc = self.trainer.evaluate(self._X_test, self._y_test)
            self._metrics = self._make_metrics_now(test_loss, test_acc, self.trainer.step_count)
        return self._metrics

    def _drain_pending(self) -> None:
        while self._pending:
            fn, fut = self._pending.popleft()
            self._call(fn, fut)

    def _call(self, fn: Callable[[Any], Any], fut: Future[Any]) -> None:
        if not fut.set_running_or_notify_cancel():
            return
        try:
            fut.set_result(fn(self.trainer.model.params.data))
        except BaseException as exc:  # the caller gets it through the future
            fut.set_exception(exc)

    # --- metrics -------------------------------------------------------------------------

    def _make_metrics_now(
        self,
        test_loss: float | None = None,
        test_acc: float | None = None,
        eval_step: int | None = None,
    ) -> WorkerMetrics:
        prev = self._metrics
        loss = self._win_loss / self._win_steps if self._win_steps else prev.loss
        rate = (
            self._win_steps * self.trainer.batch_size / self._win_train_s
            if self._win_train_s > 0
            else prev.samples_per_s
        )
        return self._make_metrics(
            loss,
            prev.test_loss if test_loss is None else test_loss,
            prev.test_acc if test_acc is None else test_acc,
            prev.eval_step if eval_step is None else eval_step,
            rate,
        )

    def _make_metrics(
        self, loss: float, test_loss: float, test_acc: float, eval_step: int, rate: float
    ) -> WorkerMetrics:
        t = self.trainer
        return WorkerMetrics(
            step=t.step_count,
            samples_seen=t.samples_seen,
            epoch=t.epoch,
            loss=loss,
            test_loss=test_loss,
            test_acc=test_acc,
            eval_step=eval_step,
            samples_per_s=rate,
            device=self.device,
            running=self._running,
            elapsed_s=time.perf_counter() - self._t_start if self._t_start else 0.0,
            utilization=self.utilization(),
            waited_s=self.waited_s,
        )
