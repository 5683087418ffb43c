"""Training, with no network: trainer, its worker thread, mixes, data, shards, models, checkpoints.

The public front: the names other rooms use.
"""

from swarmnode.node.train.build import build_trainer, resume, run_meta
from swarmnode.node.train.config import NodeConfig
from swarmnode.node.train.data import load_dataset
from swarmnode.node.train.errors import CheckpointError, ConfigError, DataError
from swarmnode.node.train.models import build_model
from swarmnode.node.train.trainer import Trainer
from swarmnode.node.train.worker import TrainingWorker, WorkerMetrics

__all__ = [
    "CheckpointError",
    "ConfigError",
    "DataError",
    "NodeConfig",
    "Trainer",
    "TrainingWorker",
    "WorkerMetrics",
    "build_model",
    "build_trainer",
    "load_dataset",
    "resume",
    "run_meta",
]
