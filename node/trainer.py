"""The synchronous training loop of one peer: minibatch SGD over a (shard of a) data set.

`Trainer` is plain and blocking on purpose: one `step()` is one minibatch forward/backward plus one
optimizer update. It is driven from a worker thread (`node.worker.TrainingWorker`), never from the
asyncio event loop. The training data is moved to the model's device once; each epoch's shuffle
order is drawn from a seeded RNG, so two trainers built with the same seed produce bit-identical
parameters on the same backend, and `state()` / `load_state()` carry everything (parameters,
optimizer state, counters, RNG and position inside the epoch) needed to resume exactly.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from kernels.errors import SwarmnodeError
from node.errors import CheckpointError

EVAL_BATCH = 4096  # bounds device memory during evaluation of large test sets


class DivergedError(SwarmnodeError):
    """The training loss became NaN or Inf; the parameters are left as they were before the step."""


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
        self.samples_seen = 0
        self._X = self._to_device(np.ascontiguousarray(X, dtype=np.float32))
        self._y = self._to_device(np.ascontiguousarray(y, dtype=np.int64))
        self._rng = np.random.default_rng([seed, 0x7261696E])  # own stream: not the init's
        self.epoch = 0
        self._new_epoch()

    # --- training ------------------------------------------------------------------------

    def step(self) -> float:
        """One minibatch: forward, backward, optimizer update. Returns the batch loss."""
        if self._pos + self.batch_size > self.n_samples:
            self.epoch += 1
            self._new_epoch()
        idx = self._perm_dev[self._pos : self._pos + self.batch_size]
        loss = float(self.model.loss_and_grad(self._X[idx], self._y[idx]))
        if not math.isfinite(loss):
            # Checked before the update, so the parameters stay finite for a checkpoint or a peer.
            raise DivergedError(
                f"training diverged: loss is {loss} at step {self.step_count + 1} "
                f"(try a smaller --lr)"
            )
        self.optimizer.step()
        self._pos += self.batch_size
        self.step_count += 1
        self.samples_seen += self.batch_size
        return loss

    def evaluate(self, X: Any, y: Any) -> tuple[float, float]:
        """Mean loss and accuracy over (X, y), in batches; arrays may be host or device."""
        n = len(y)
        if n == 0:
            return float("nan"), float("nan")
        X, y = self._to_device(X), self._to_device(y)
        total_loss = 0.0
        total_correct = 0.0
        for lo in range(0, n, EVAL_BATCH):
            hi = min(lo + EVAL_BATCH, n)
            loss, acc = self.model.evaluate(X[lo:hi], y[lo:hi])
            total_loss += float(loss) * (hi - lo)
            total_correct += float(acc) * (hi - lo)
        return total_loss / n, total_correct / n

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
        """Restore from `state()`. Raises `CheckpointError` if it does not fit this model/data."""
        params = np.asarray(state["params"])
        own = self.model.params.data
        if params.shape != tuple(own.shape) or params.dtype != np.float32:
            raise CheckpointError(
                f"checkpoint parameters are {params.dtype}{list(params.shape)} but the model has "
                f"float32{list(own.shape)}: it was written for another model"
            )
        perm = np.asarray(state["epoch_perm"], dtype=np.int64)
        if perm.shape != (self.n_samples,):
            raise CheckpointError(
                f"checkpoint was written for {perm.size} training samples, this run has "
                f"{self.n_samples} (another data set or shard)"
            )
        own[...] = self._to_device(params)
        self.optimizer.load_state_dict(state["optimizer"])
        self.step_count = int(state["step"])
        self.samples_seen = int(state["samples_seen"])
        self.epoch = int(state["epoch"])
        self._rng.bit_generator.state = state["rng"]
        self._set_perm(perm)
        self._pos = int(state["epoch_pos"])

    # --- internals -----------------------------------------------------------------------

    def _new_epoch(self) -> None:
        self._set_perm(self._rng.permutation(self.n_samples))
        self._pos = 0

    def _set_perm(self, perm: np.ndarray) -> None:
        self._perm = perm
        # The order lives on the device too, so a step slices it there (no per-step transfer).
        self._perm_dev = self._to_device(perm)

    def _to_device(self, a: Any) -> Any:
        if self.backend is None:
            return np.asarray(a)
        return self.backend.asarray(a)


def _to_host(a: Any) -> np.ndarray:
    if isinstance(a, np.ndarray):
        return a
    from kernels.backend import to_numpy  # imported lazily: only device arrays need it

    return to_numpy(a)
