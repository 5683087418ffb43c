"""`swarmnode start`: the training options of a peer, and the blocks that build its trainer.

Every `start` runs a swarm peer (`node.run_peer`): alone it trains like a single node, with
`--join` it joins a swarm. This module owns the training half of the command line
(`add_training_options`, `config_from_args`) and the pieces the peer builds its `TrainingWorker`
from: `build_trainer` (data shard, backend, model, optimizer), `resume` (newest readable
checkpoint, refused if written for another model/data/shard) and `run_meta`.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

from node import config as defaults
from node.checkpoint import load_latest, lock_checkpoint_dir
from node.config import NodeConfig
from node.data import Dataset, load_dataset
from node.errors import CheckpointError, ConfigError
from node.shard import parse_partition, parse_shard, shard_indices
from node.trainer import Trainer

HELP = "train one peer on the bundled digits (or any data set) and report test accuracy"

DESCRIPTION = """\
Start one peer. With no options it trains alone: an MLP on the bundled UCI digits, reaching
>= 96% test accuracy in seconds on one CPU core, with a progress line every --eval-every steps.
With --join HOST:PORT it joins a running swarm and exchanges parameters with it.
With --checkpoint-dir the run checkpoints every --checkpoint-every steps and resumes from the
newest readable checkpoint there. SIGINT/SIGTERM stop cleanly: the peer leaves the swarm, saves
a final checkpoint and exits 0.
"""

# Fields recorded in each checkpoint; a resume with a different value would silently mix runs.
_RESUME_MUST_MATCH = ("model", "data", "shard", "partition")


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "start",
        help=HELP,
        description=DESCRIPTION,
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    add_training_options(p)
    from node.peer_options import add_peer_options  # late: peer_options imports this module's deps

    add_peer_options(p)
    p.set_defaults(func=run)


def add_training_options(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("model and data")
    g.add_argument(
        "--model",
        default=defaults.DEFAULT_MODEL,
        help="model spec, e.g. mlp:128 or mlp:256,128 (grammar: README 'Model spec grammar')",
    )
    g.add_argument(
        "--data",
        default="digits",
        help="'digits' (bundled), 'synthetic:N,D,C[,SEED]', or a path to an .npz with "
        "X_train, y_train, X_test, y_test",
    )
    g.add_argument(
        "--shard",
        type=_arg_type(parse_shard),
        default="0/1",
        metavar="INDEX/COUNT",
        help="train on shard INDEX of COUNT (0/1: the whole train set)",
    )
    g.add_argument(
        "--partition",
        type=_arg_type(parse_partition),
        default="iid",
        metavar="iid|dirichlet:ALPHA",
        help="how the train set is split into shards: iid, or non-iid by label with "
        "Dirichlet concentration ALPHA (small = skewed)",
    )
    t = p.add_argument_group("training")
    t.add_argument(
        "--steps",
        type=int,
        default=defaults.DEFAULT_STEPS,
        help="total optimizer steps (a resumed run continues up to this count)",
    )
    t.add_argument(
        "--batch-size", type=int, default=defaults.DEFAULT_BATCH_SIZE, help="minibatch size"
    )
    t.add_argument("--lr", type=float, default=defaults.DEFAULT_LR, help="learning rate")
    t.add_argument("--optimizer", default=defaults.DEFAULT_OPTIMIZER, help="sgd or adamw")
    t.add_argument(
        "--momentum",
        type=float,
        default=defaults.DEFAULT_MOMENTUM,
        help="SGD momentum (ignored by adamw)",
    )
    t.add_argument(
        "--weight-decay",
        type=float,
        default=0.0,
        help="weight decay (L2 for sgd, decoupled for adamw)",
    )
    t.add_argument(
        "--device",
        default="auto",
        help="auto, cpu, cuda or cuda:N (auto: cuda when cupy and a GPU are present)",
    )
    t.add_argument(
        "--seed", type=int, default=0, help="seed for initialisation, shuffling and sharding"
    )
    o = p.add_argument_group("output and checkpoints")
    o.add_argument(
        "--eval-every",
        type=int,
        default=defaults.DEFAULT_EVAL_EVERY,
        help="evaluate on the test split and print a line every N steps",
    )
    o.add_argument(
        "--checkpoint-dir",
        default=None,
        help="directory for checkpoints; the run resumes from the newest one found there",
    )
    o.add_argument(
        "--checkpoint-every",
        type=int,
        default=defaults.DEFAULT_CHECKPOINT_EVERY,
        help="checkpoint every N steps (needs --checkpoint-dir)",
    )
    o.add_argument(
        "--keep-checkpoints",
        type=int,
        default=defaults.DEFAULT_KEEP_CHECKPOINTS,
        help="how many checkpoints to keep",
    )
    o.add_argument(
        "--summary-json",
        default=None,
        metavar="PATH",
        help="write the final metrics (test_accuracy, test_loss, steps, samples_per_s, device, wall_s) to PATH",
    )


def _arg_type(parse: Callable[[str], Any]) -> Callable[[str], Any]:
    """Wrap a parser so argparse reports its ConfigError as a usage error (exit 2)."""

    def convert(text: str) -> Any:
        try:
            return parse(text)
        except ConfigError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None

    convert.__name__ = parse.__name__.removeprefix("parse_")
    return convert


def config_from_args(args: argparse.Namespace) -> NodeConfig:
    return NodeConfig(
        model=args.model,
        data=args.data,
        steps=args.steps,
        batch_size=args.batch_size,
        lr=args.lr,
        optimizer=args.optimizer,
        momentum=args.momentum,
        weight_decay=args.weight_decay,
        device=args.device,
        seed=args.seed,
        eval_every=args.eval_every,
        checkpoint_dir=args.checkpoint_dir,
        checkpoint_every=args.checkpoint_every,
        keep_checkpoints=args.keep_checkpoints,
        summary_json=args.summary_json,
        shard=args.shard,
        partition=args.partition,
    ).validate()


def run(args: argparse.Namespace) -> int:
    """Every `start` is a swarm peer: alone it trains like a single node, with --join it joins."""
    from node.peer_options import peer_config_from_args
    from node.run_peer import run_peer

    run_peer(peer_config_from_args(args, config_from_args(args)))
    return 0


# --- building blocks (reused by the peer service) ---------------------------------------------


def load_shard(cfg: NodeConfig) -> tuple[Dataset, Any, Any]:
    """The data set and this peer's (X_train, y_train) shard."""
    data = load_dataset(cfg.data)
    index, count = cfg.shard
    if count == 1:
        return data, data.X_train, data.y_train
    idx = shard_indices(data.y_train, count, index, cfg.partition, cfg.seed)
    return data, data.X_train[idx], data.y_train[idx]


def build_trainer(cfg: NodeConfig) -> tuple[Trainer, Dataset, Any]:
    """Backend, data, model, optimizer and trainer for `cfg` (no checkpoint loading)."""
    data, X, y = load_shard(cfg)  # first: a bad --data fails before any device set-up

    from kernels.backend import select_backend  # lazy: keeps `swarmnode --help` fast
    from kernels.optim import make_optimizer
    from node.models import build_model

    backend = select_backend(cfg.device)
    model = build_model(cfg.model, data.input_shape, data.n_classes, backend, cfg.seed)
    optimizer = make_optimizer(cfg.optimizer, model.params, cfg.lr, **_optimizer_kwargs(cfg))
    trainer = Trainer(model, optimizer, X, y, cfg.batch_size, cfg.seed, backend=backend)
    return trainer, data, backend


def _optimizer_kwargs(cfg: NodeConfig) -> dict[str, float]:
    kw = {"weight_decay": cfg.weight_decay}
    if cfg.optimizer.lower() == "sgd":
        kw["momentum"] = cfg.momentum
    return kw


def run_meta(cfg: NodeConfig) -> dict[str, Any]:
    """What a checkpoint records about the run that wrote it."""
    return {
        "model": cfg.model,
        "data": cfg.data,
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
