"""Training, with no network. The public front: the names other rooms use.

Rooms (of this level, each imports only `errors.py` and `user_code.py`, never the modules that
drive it; rooms never import each other in a circle: tests/test_import_rules.py):

- `model/`: what a model is (`Model`, `TrainableModel`) and where it comes from (built-in
  specs, a user's model, a torch module).
- `data/`: data sets, streamed inputs, a peer's shard and its label prior.
- `mixing/`: received models folded between two steps, the outer step, the collapse guard.
- `lr/`: the learning rate scaled with the swarm, and the gain ratio it may measure.

At this level, what puts them together and drives them:

- `trainer.py`: `Trainer`, the synchronous training loop; `worker.py`: `TrainingWorker`, the
  thread that steps it (with `metrics.py`, what it reports, and `pacing.py`, its pauses).
- `build.py`: a trainer from a `NodeConfig` (`config.py`), resumed from `checkpoint.py`;
  `sources.py`: the model and data that `--model` and `--data` name.
- `user_code.py`: calling the user's code, its errors told as theirs; `errors.py`: the errors.
"""

from swarmnode.node.train.build import build_trainer, resume, run_meta
from swarmnode.node.train.checkpoint import (
    list_checkpoints,
    load_latest,
    lock_checkpoint_dir,
    save_checkpoint,
)
from swarmnode.node.train.config import (
    DEFAULT_MODEL,
    LR_SCHEDULES,
    NodeConfig,
    check_writable_dir,
)
from swarmnode.node.train.data import load_dataset
from swarmnode.node.train.errors import CheckpointError, ConfigError, DataError, DivergedError
from swarmnode.node.train.model import build_model
from swarmnode.node.train.pacing import MAX_STEP_S
from swarmnode.node.train.trainer import Trainer
from swarmnode.node.train.user_code import describe, user_error
from swarmnode.node.train.worker import TRAIN_THREAD, TrainingWorker, WorkerMetrics

__all__ = [
    "DEFAULT_MODEL",
    "LR_SCHEDULES",
    "MAX_STEP_S",
    "TRAIN_THREAD",
    "CheckpointError",
    "ConfigError",
    "DataError",
    "DivergedError",
    "NodeConfig",
    "Trainer",
    "TrainingWorker",
    "WorkerMetrics",
    "build_model",
    "build_trainer",
    "check_writable_dir",
    "describe",
    "list_checkpoints",
    "load_dataset",
    "load_latest",
    "lock_checkpoint_dir",
    "resume",
    "run_meta",
    "save_checkpoint",
    "user_error",
]
