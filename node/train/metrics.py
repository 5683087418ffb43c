"""`WorkerMetrics`: what the training thread reports after each evaluation."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any


@dataclass(frozen=True)
class WorkerMetrics:
    """A consistent view of the worker's progress (all from one moment)."""

    step: int
    samples_seen: int
    epoch: int
    loss: float  # mean train loss over the steps since the previous evaluation
    test_loss: float
    test_acc: float
    eval_step: int  # the step at which test_loss / test_acc were measured (-1: never)
    samples_per_s: float  # train throughput over the steps since the previous evaluation
    device: str
    running: bool
    elapsed_s: float  # since start()

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


EvalCallback = Callable[[WorkerMetrics], None]
CheckpointCallback = Callable[[dict[str, Any]], None]
