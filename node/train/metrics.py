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
    # share of the thread's time spent training, not held waiting for an exchange round
    utilization: float = 1.0
    waited_s: float = 0.0  # held at the step limit (TrainingWorker.set_step_limit), in total

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


EvalCallback = Callable[[WorkerMetrics], None]
CheckpointCallback = Callable[[dict[str, Any]], None]
