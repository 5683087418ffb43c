"""Build a peer's trainer from its `NodeConfig`: data shard, backend, model, optimizer, resume.

On a label-skewed shard the trainer gets its logit offsets here (node/train/data/label_prior.py).
`--model` and `--data` may name the user's own code (node/train/sources.py): their model is
checked by a dry run on a few samples here, before the peer serves or joins anyone.

`build_trainer` (data shard, backend, model, optimizer), `resume` (the newest readable
checkpoint, refused if written for another model/data/shard) and `run_meta` (what a checkpoint
records about its run). The peer builds its `TrainingWorker` from these; single-process tools
(benchmarks, tests) use them directly.
"""

from __future__ import annotations

from typing import Any

from swarmnode.node.train.checkpoint import load_latest, lock_checkpoint_dir
from swarmnode.node.train.config import NodeConfig
from swarmnode.node.train.data import Dataset, logit_offsets, shard_indices, take_rows
from swarmnode.node.train.errors import CheckpointError
from swarmnode.node.train.trainer import Trainer
from swarmnode.node.train.user_code import describe

# Fields recorded in each checkpoint; a resume with a different value would silently mix runs.
_RESUME_MUST_MATCH = ("model", "data", "shard", "partition")


def load_shard(cfg: NodeConfig) -> tuple[Dataset, Any, Any]:
    """The data set and this peer's (X_train, y_train) shard (a view, for streamed inputs)."""
    from swarmnode.node.train.sources import resolve_data  # lazy: imports the layers

    data = resolve_data(cfg.data, cfg.seed)
    index, count = cfg.shard
    if count == 1:
        return data, data.X_train, data.y_train
    idx = shard_indices(data.y_train, count, index, cfg.partition, cfg.seed)
    return data, take_rows(data.X_train, idx), data.y_train[idx]


def build_trainer(cfg: NodeConfig) -> tuple[Trainer, Dataset, Any]:
    """Backend, data, model, optimizer and trainer for `cfg` (no checkpoint loading)."""
    data, X, y = load_shard(cfg)  # first: a bad --data fails before any device set-up

    from swarmnode.kernels.backend import select_backend  # lazy: keeps `swarmnode --help` fast
    from swarmnode.kernels.optim import make_optimizer
    from swarmnode.node.train.model import UserModel
    from swarmnode.node.train.sources import check_device, resolve_model

    backend = select_backend(cfg.device)
    model = resolve_model(cfg.model, data, backend, cfg.seed)
    user = isinstance(model, UserModel)
    if user:  # it lives where its params are; a dry run before anything else is started
        check_device(model, backend, cfg.device)
        backend = model.backend
        model.check(X, y, data.X_test, data.y_test)
    optimizer = make_optimizer(cfg.optimizer, model.params, cfg.lr, **_optimizer_kwargs(cfg))
    trainer = Trainer(model, optimizer, X, y, cfg.batch_size, cfg.seed, backend=backend)
    trainer.lr_schedule = cfg.schedule()  # on the step counter: a resume or a join continues it
    if not user:  # the logit-adjusted loss is the built-in softmax classifier's
        trainer.set_logit_offset(logit_offsets(y, data.y_train, data.n_classes, cfg.logit_adjust))
    return trainer, data, backend


def _optimizer_kwargs(cfg: NodeConfig) -> dict[str, float]:
    kw = {"weight_decay": cfg.weight_decay}
    if cfg.optimizer.lower() == "sgd":
        kw["momentum"] = cfg.momentum
    return kw


def run_meta(cfg: NodeConfig) -> dict[str, Any]:
    """What a checkpoint records about the run that wrote it."""
    return {
        "model": describe(cfg.model),
        "data": describe(cfg.data),
        "shard": f"{cfg.shard[0]}/{cfg.shard[1]}",
        "partition": str(cfg.partition),
        "seed": cfg.seed,
    }


def resume(trainer: Trainer, cfg: NodeConfig) -> dict[str, Any] | None:
    """Load the newest readable checkpoint of `cfg.checkpoint_dir` into `trainer`, if any."""
    if cfg.checkpoint_dir is None:
        return None
    # Normally taken already by `load_identity` (re-locking is free); here too so no caller can
    # resume from a directory another live process is writing.
    lock_checkpoint_dir(cfg.checkpoint_dir)
    state = load_latest(cfg.checkpoint_dir)
    if state is None:
        return None
    meta = state.get("meta", {})
    mine = run_meta(cfg)
    for key in _RESUME_MUST_MATCH:
        if key in meta and meta[key] != mine[key]:
            raise CheckpointError(
                f"checkpoint {state['_path']} was written with --{key} {meta[key]!r}, this run "
                f"has {mine[key]!r}; use another --checkpoint-dir"
            )
    trainer.load_state(state)
    return state
