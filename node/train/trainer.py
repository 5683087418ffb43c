"""The synchronous training loop of one peer: minibatch SGD over a (shard of a) data set.

`Trainer` is plain and blocking on purpose: one `step()` is one minibatch forward/backward plus one
optimizer update. It is driven from a worker thread (`swarmnode.node.train.worker.TrainingWorker`), never from the
asyncio event loop. The model is any `TrainableModel` (node/train/model/protocol.py): the built-in
`Sequential`, or a user's model behind `UserModel`. The training data is moved to the model's
device once, unless it is streamed (inputs that are not an in-memory array, e.g. rows read
from a .npy file on demand: node/train/data/streamed.py): then each batch is read, and moved, when
it is drawn. Each epoch's shuffle
order is drawn from a seeded RNG, so two trainers built with the same seed produce bit-identical
parameters on the same backend, and `state()` / `load_state()` carry everything (parameters,
optimizer state, counters, RNG and position inside the epoch) needed to resume exactly.

Each step's learning rate is `lr_at(step_count)`: the optimizer's rate at construction (the
peak, `--lr`) x `lr_scale` (the swarm's scale, which the worker sets per step:
node/train/lr/scale.py) x `lr_schedule.factor(step_count)` (node/train/lr/schedule.py). It is a
function of the step counter alone, so the resume above resumes the schedule too, and a joiner
given the swarm's counter (node/peer/state_sync.py) continues it. While neither is in use (a
constant schedule without warm-up, a scale never set) the optimizer's rate is left alone.
"""

from __future__ import annotations

import contextlib
import math
from typing import Any

import numpy as np
from swarmnode.kernels.errors import SwarmnodeError
from swarmnode.node.train.data import is_streamed
from swarmnode.node.train.errors import CheckpointError, DivergedError
from swarmnode.node.train.lr import LRSchedule

EVAL_BATCH = 4096  # bounds device memory during evaluation of large test sets
# What `state()` writes and `load_state()` needs; a checkpoint lacking any of them is refused.
_STATE_KEYS = (
    "step",
    "samples_seen",
    "epoch",
    "epoch_pos",
    "epoch_perm",
    "rng",
    "params",
    "optimizer",
)


class Trainer:
    """Minibatch training of `model` with `optimizer` on host arrays `X`, `y`."""

    def __init__(
        self,
        model: Any,
        optimizer: Any,
        X: np.ndarray,
        y: np.ndarray,
        batch_size: int,
        seed: int,
        backend: Any = None,
    ) -> None:
        if len(X) != len(y) or len(y) == 0:
            raise ValueError(f"need equally many (>0) inputs and labels, got {len(X)} and {len(y)}")
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        self.model = model
        self.optimizer = optimizer
        self.backend = backend if backend is not None else getattr(model, "backend", None)
        self.batch_size = min(batch_size, len(y))
        self.n_samples = len(y)
        self.step_count = 0
        # held while a step changes the parameters (the update, not the forward/backward): the
        # training worker sets its snapshot lock here (node/train/worker.py)
        self.update_lock: contextlib.AbstractContextManager[Any] = contextlib.nullcontext()
        self.samples_seen = 0
        self.peak_lr = float(getattr(optimizer, "lr", 0.0))
        self.lr_schedule = LRSchedule()  # constant, no warm-up (build.py sets the config's)
        self._lr_scale = 1.0
        self._lr_driven = False  # the scale was set once: from then on the lr is set each step
        # set (node/train/lr/gain.py) to measure the gradient noise: each step in two half-batches
        self.grad_probe: Any = None
        # set on a label-skewed shard (node/train/data/label_prior.py): added to the logits
        # in the loss
        self.logit_offset: Any = None
        # Streamed inputs stay where they are (host, disk) and their labels on the host with
        # them: a batch is gathered, then moved (`_batch`). A memmap counts as streamed too:
        # converting it would read the whole file into memory.
        self.streamed = is_streamed(X)
        self._X = X if self.streamed else self._to_device(np.ascontiguousarray(X, dtype=np.float32))
        self._y = self._place(_labels(y))
        self._rng = np.random.default_rng([seed, 0x7261696E])  # own stream: not the init's
        self.epoch = 0
        self._new_epoch()

    # --- training ------------------------------------------------------------------------

    def set_logit_offset(self, offsets: np.ndarray | None) -> None:
        """Per-class offsets added to the logits in the loss (None: none), moved to the model's
        device once here rather than at every step."""
        self.logit_offset = None if offsets is None else self._to_device(offsets)

    @property
    def lr_scale(self) -> float:
        """The swarm's scale of the peak lr (1.0: alone, or no `--lr-scale` rule)."""
        return self._lr_scale

    @lr_scale.setter
    def lr_scale(self, value: float) -> None:
        self._lr_scale = float(value)
        self._lr_driven = True  # a scale back at 1.0 must still be applied

    def lr_at(self, step: int) -> float:
        """The learning rate of the step taken at counter `step`."""
        return self.peak_lr * self._lr_scale * self.lr_schedule.factor(step)

    def step(self) -> float:
        """One minibatch: forward, backward, optimizer update. Returns the batch loss."""
        if self._lr_driven or not self.lr_schedule.trivial:  # the setter checks a float: cheap
            self.optimizer.lr = self.lr_at(self.step_count)
        if self._pos + self.batch_size > self.n_samples:
            self.epoch += 1
            self._new_epoch()
        perm = self._perm if self.streamed else self._perm_dev
        idx = perm[self._pos : self._pos + self.batch_size]
        probe = self.grad_probe
        if probe is None or self.batch_size < 2:
            loss = float(self.model.loss_and_grad(*self._batch(idx), self.logit_offset))
        else:
            loss = self._probed_loss_and_grad(idx, probe)
        if not math.isfinite(loss):
            # Checked before the update, so the parameters stay finite for a checkpoint or a peer.
            hint = getattr(self.model, "divergence_hint", "try a smaller --lr")
            raise DivergedError(
                f"training diverged: loss is {loss} at step {self.step_count + 1} ({hint})"
            )
        with self.update_lock:
            self.optimizer.step()
            self._pos += self.batch_size
            self.step_count += 1
            self.samples_seen += self.batch_size
        return loss

    def _probed_loss_and_grad(self, idx: Any, probe: Any) -> float:
        """The batch's mean loss and gradient, taken as two halves so that `probe` sees their
        difference (the gradient noise); the result is the full batch's, up to rounding."""
        h = self.batch_size // 2
        a, b = idx[:h], idx[h:]
        loss_a = float(self.model.loss_and_grad(*self._batch(a), self.logit_offset))
        probe.hold(self.model.params.grad)
        loss_b = float(self.model.loss_and_grad(*self._batch(b), self.logit_offset))
        probe.merge(self.model.params.grad, h, self.batch_size - h)
        return (h * loss_a + (self.batch_size - h) * loss_b) / self.batch_size

    def evaluate(self, X: Any, y: Any) -> tuple[float, float]:
        """Mean loss and accuracy over (X, y), in batches; arrays may be host or device."""
        n = len(y)
        if n == 0:
            return float("nan"), float("nan")
        total_loss = 0.0
        total_correct = 0.0
        with self.on_device():  # the peer evaluates from threads other than the training one
            for lo in range(0, n, EVAL_BATCH):
                hi = min(lo + EVAL_BATCH, n)
                # a no-op for arrays already on the device; a streamed split is read here
                xb, yb = self._to_device(X[lo:hi]), self._to_device(y[lo:hi])
                loss, acc = self.model.evaluate(xb, yb)
                total_loss += float(loss) * (hi - lo)
                total_correct += float(acc) * (hi - lo)
        return total_loss / n, total_correct / n

    def on_device(self) -> contextlib.AbstractContextManager[Any]:
        """Make the model's device current on the calling thread (see `Backend.use`)."""
        use = getattr(self.backend, "use", None)
        return use() if use is not None else contextlib.nullcontext()

    # --- checkpoint state ----------------------------------------------------------------

    def state(self) -> dict[str, Any]:
        """Everything needed to resume exactly, as host arrays and JSON scalars."""
        return {
            "step": self.step_count,
            "samples_seen": self.samples_seen,
            "epoch": self.epoch,
            "epoch_pos": self._pos,
            "epoch_perm": self._perm.copy(),
            "rng": self._rng.bit_generator.state,
            "params": _to_host(self.model.params.data).copy(),
            "optimizer": self.optimizer.state_dict(),
        }

    def load_state(self, state: dict[str, Any]) -> None:
        """Restore from `state()`. Raises `CheckpointError` if it does not fit this model/data.

        All-or-nothing: every part is checked before anything is assigned, so a rejected
        checkpoint leaves the trainer exactly as it was (a peer may then start fresh or sync).
        """
        params, perm, counters, rng_state = self._check_state(state)
        # The peer resumes from a pool thread: without its device current there, the copies
        # below would stage on device 0 while the model lives on cuda:N.
        with self.on_device():
            try:
                # First, because it is the only step that can still refuse (it re-checks, then
                # writes all or nothing); everything after it was validated above.
                self.optimizer.load_state_dict(state["optimizer"])
            except (SwarmnodeError, ValueError, TypeError) as exc:
                raise CheckpointError(f"checkpoint optimizer state does not fit: {exc}") from None
            self.model.params.data[...] = self._to_device(params)
        self.step_count, self.samples_seen, self.epoch, pos = counters
        self._rng.bit_generator.state = rng_state
        self._set_perm(perm)
        self._pos = pos

    def _check_state(self, state: Any) -> tuple[np.ndarray, np.ndarray, tuple[int, ...], dict]:
        """(params, perm, (step, samples_seen, epoch, epoch_pos), rng state), all validated."""
        if not isinstance(state, dict):
            raise CheckpointError(f"checkpoint state must be a mapping, got {type(state).__name__}")
        missing = [k for k in _STATE_KEYS if k not in state]
        if missing:
            raise CheckpointError(f"checkpoint lacks {', '.join(missing)}")
        params = self._check_params(state["params"])
        perm = self._check_perm(state["epoch_perm"])
        counters = tuple(_count(state, k) for k in ("step", "samples_seen", "epoch", "epoch_pos"))
        if counters[3] > self.n_samples:
            raise CheckpointError(
                f"checkpoint epoch_pos {counters[3]} is past the {self.n_samples} samples"
            )
        self._check_optimizer(state["optimizer"])
        return params, perm, counters, self._check_rng(state["rng"])

    def _check_params(self, value: Any) -> np.ndarray:
        params = np.asarray(value)
        own = self.model.params.data
        if params.shape != tuple(own.shape) or params.dtype != own.dtype:
            raise CheckpointError(
                f"checkpoint parameters are {params.dtype}{list(params.shape)} but the model has "
                f"{own.dtype}{list(own.shape)}: it was written for another model"
            )
        if not np.isfinite(params).all():
            raise CheckpointError("checkpoint parameters contain NaN or Inf")
        return params

    def _check_perm(self, value: Any) -> np.ndarray:
        perm = np.asarray(value)
        if perm.shape != (self.n_samples,):
            raise CheckpointError(
                f"checkpoint was written for {perm.size} training samples, this run has "
                f"{self.n_samples} (another data set or shard)"
            )
        # A permutation of 0..n-1, or the next steps would index out of range or repeat samples.
        if perm.dtype.kind not in "iu" or not np.array_equal(
            np.sort(perm), np.arange(self.n_samples)
        ):
            raise CheckpointError("checkpoint epoch order is not a permutation of the samples")
        return perm.astype(np.int64)

    def _check_optimizer(self, opt_state: Any) -> None:
        # The optimizer re-checks its own vectors; the name is checked here so the message says
        # which flag differs rather than failing on a missing slot.
        name = getattr(self.optimizer, "name", None)
        if not isinstance(opt_state, dict):
            raise CheckpointError("checkpoint optimizer state is not a mapping")
        saved = opt_state.get("name")
        if name is not None and saved != name:
            raise CheckpointError(
                f"checkpoint was written with --optimizer {saved!r}, this run uses {name!r}"
            )
        if "t" in opt_state:
            _count(opt_state, "t")
        size = int(self.model.params.data.size)
        for slot in getattr(self.optimizer, "_slots", ()):
            v = np.asarray(opt_state.get(slot))
            if v.shape != (size,) or v.dtype.kind != "f" or not np.isfinite(v).all():
                raise CheckpointError(
                    f"checkpoint optimizer state {slot!r} is not {size} finite floats"
                )

    def _check_rng(self, rng_state: Any) -> dict:
        # Trial-load into a fresh generator of the same kind: the bit generator is the authority
        # on its own state layout, and ours stays untouched if it refuses.
        try:
            probe = type(self._rng.bit_generator)()
            probe.state = rng_state
        except (TypeError, ValueError, KeyError, OverflowError) as exc:
            raise CheckpointError(f"checkpoint RNG state is malformed ({exc})") from None
        return probe.state

    # --- label access (byzantine label-flip) --------------------------------------------

    def labels(self) -> np.ndarray:
        """A host copy of the training labels, in this trainer's sample order."""
        return _to_host(self._y).copy()

    def set_labels(self, y: Any) -> None:
        """Replace the training labels (same count); the data and epoch order stay as they are."""
        y = _labels(y)
        if y.shape != (self.n_samples,):
            raise ValueError(f"need {self.n_samples} labels, got shape {y.shape}")
        self._y = self._place(y)

    # --- internals -----------------------------------------------------------------------

    def _new_epoch(self) -> None:
        self._set_perm(self._rng.permutation(self.n_samples))
        self._pos = 0

    def _set_perm(self, perm: np.ndarray) -> None:
        self._perm = perm
        # The order lives on the device too, so a step slices it there (no per-step transfer).
        self._perm_dev = self._to_device(perm)

    def _batch(self, idx: Any) -> tuple[Any, Any]:
        """The inputs and labels of the samples `idx` (a slice of the epoch order), on the
        device. A streamed batch is read in ascending sample order (a disk, or an h5py-like
        reader, wants that; the mean loss does not care) and cast to float32 here."""
        if not self.streamed:
            return self._X[idx], self._y[idx]
        idx = np.sort(idx)
        x = np.ascontiguousarray(self._X[idx], dtype=np.float32)
        return self._to_device(x), self._to_device(self._y[idx])

    def _place(self, a: np.ndarray) -> Any:
        """Where the training arrays live: the device, or the host for streamed inputs."""
        return a if self.streamed else self._to_device(a)

    def _to_device(self, a: Any) -> Any:
        if is_streamed(a):  # read a batch at a time (`_batch`, `evaluate`), never whole
            return a
        if self.backend is None:
            return np.asarray(a)
        return self.backend.asarray(a)


def _labels(y: Any) -> np.ndarray:
    """Class labels as int64; other targets (a user model's regression) as float32."""
    y = np.asarray(y)
    return np.ascontiguousarray(y, dtype=np.int64 if y.dtype.kind in "iub" else np.float32)


def _count(state: dict[str, Any], key: str) -> int:
    value = state[key]
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 0:
        raise CheckpointError(f"checkpoint {key!r} must be an int >= 0, got {value!r}")
    return int(value)


def _to_host(a: Any) -> np.ndarray:
    if isinstance(a, np.ndarray):
        return a
    from swarmnode.kernels.backend import to_numpy  # imported lazily: only device arrays need it

    return to_numpy(a)
