"""`swarmnode start`: the training half of the command line.

Every `start` runs a swarm peer (`swarmnode.node.cli.run_peer`): alone it trains like a single
node, with `--join` it joins a swarm. This module owns the training options
(`add_training_options`, `config_from_args`); the peer half is `peer_options`. What the options
build (data shard, model, optimizer, resume) is `swarmnode.node.train.build`.
"""

from __future__ import annotations

import argparse
import os
import sys
import threading
from collections.abc import Callable
from typing import Any

from swarmnode.node.train.config import NodeConfig
from swarmnode.node.train.errors import ConfigError
from swarmnode.node.train.shard import parse_partition, parse_shard
from swarmnode.node.train.worker import TRAIN_THREAD

# Every default comes from the config dataclass, the one place that keeps it.
_NODE = NodeConfig()

HELP = "train one peer on the bundled digits (or any data set) and report test accuracy"

DESCRIPTION = """\
Start one peer. With no options it trains alone: an MLP on the bundled UCI digits, reaching
>= 96% test accuracy in seconds on one CPU core, with a progress line every --eval-every steps.
With --join HOST:PORT it joins a running swarm and exchanges parameters with it.
With --checkpoint-dir the run checkpoints every --checkpoint-every steps and resumes from the
newest readable checkpoint there. SIGINT/SIGTERM stop cleanly: the peer leaves the swarm, saves
a final checkpoint and exits 0.
"""


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "start",
        help=HELP,
        description=DESCRIPTION,
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    add_training_options(p)
    from swarmnode.node.cli.peer_options import (
        add_peer_options,  # late: peer_options imports this module's deps
    )

    add_peer_options(p)
    p.set_defaults(func=run)


def add_training_options(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("model and data")
    g.add_argument(
        "--model",
        default=_NODE.model,
        help="model spec, e.g. mlp:128, mlp:256,128, cnn1d:16k5,p2,64 or cnn2d:16k3,p2,32k3,p2,64 "
        "(a 2-D conv net on (H, W) or (H, W, C) images; flat samples name the image first: "
        "cnn2d:8x8,16k3,p2,64) (grammar: README 'Model spec grammar'), or MODULE:FUNCTION, a "
        "factory of your own model on PYTHONPATH or in the current directory (README 'Bring "
        "your own model')",
    )
    g.add_argument(
        "--data",
        default=_NODE.data,
        help="'digits' (bundled), 'synthetic:N,D,C[,SEED]', 'signal:N,L,C[,SEED]' (a harder "
        "seeded task: 1-D signals of length L, C classes, 10%% label noise, where a shard "
        "alone overfits), a path to an .npz with X_train, y_train, X_test, y_test, a folder of "
        "those four as .npy files (the inputs are streamed from disk: a set larger than "
        "memory trains), or MODULE:FUNCTION, a function of yours that returns them",
    )
    g.add_argument(
        "--shard",
        type=_arg_type(parse_shard),
        default="/".join(map(str, _NODE.shard)),
        metavar="INDEX/COUNT",
        help="train on shard INDEX of COUNT (0/1: the whole train set)",
    )
    g.add_argument(
        "--partition",
        type=_arg_type(parse_partition),
        default=str(_NODE.partition),
        metavar="iid|dirichlet:ALPHA",
        help="how the train set is split into shards: iid, or non-iid by label with "
        "Dirichlet concentration ALPHA (small = skewed)",
    )
    t = p.add_argument_group("training")
    t.add_argument(
        "--steps",
        type=int,
        default=_NODE.steps,
        help="total optimizer steps (a resumed run continues up to this count)",
    )
    t.add_argument("--batch-size", type=int, default=_NODE.batch_size, help="minibatch size")
    t.add_argument("--lr", type=float, default=_NODE.lr, help="learning rate")
    t.add_argument("--optimizer", default=_NODE.optimizer, help="sgd or adamw")
    t.add_argument(
        "--momentum",
        type=float,
        default=_NODE.momentum,
        help="SGD momentum (ignored by adamw)",
    )
    t.add_argument(
        "--weight-decay",
        type=float,
        default=_NODE.weight_decay,
        help="weight decay (L2 for sgd, decoupled for adamw)",
    )
    t.add_argument(
        "--logit-adjust",
        type=float,
        default=_NODE.logit_adjust,
        metavar="TAU",
        help="on a --shard whose labels are skewed (dirichlet), train on logits + TAU x "
        "log(shard prior / whole set's prior), so that the model does not learn its shard's "
        "class mix and stays close to the swarm's between mixes; 0: off, 1: the full "
        "adjustment (no effect alone or on all of the data)",
    )
    t.add_argument(
        "--device",
        default=_NODE.device,
        help="auto, cpu, cuda or cuda:N (auto: cuda when cupy and a GPU are present)",
    )
    t.add_argument(
        "--seed",
        type=int,
        default=_NODE.seed,
        help="seed for initialisation, shuffling and sharding",
    )
    o = p.add_argument_group("output and checkpoints")
    o.add_argument(
        "--eval-every",
        type=int,
        default=_NODE.eval_every,
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
        default=_NODE.checkpoint_every,
        help="checkpoint every N steps (needs --checkpoint-dir)",
    )
    o.add_argument(
        "--keep-checkpoints",
        type=int,
        default=_NODE.keep_checkpoints,
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
        logit_adjust=args.logit_adjust,
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
    from swarmnode.node.cli.peer_options import peer_config_from_args
    from swarmnode.node.cli.run_peer import run_peer

    run_peer(peer_config_from_args(args, config_from_args(args)))
    _exit_now_if_a_step_was_abandoned()
    return 0


def _exit_now_if_a_step_was_abandoned() -> None:
    """A training step still running when close()'s budget ran out was abandoned (its thread is
    a daemon; the checkpoint before it stands). Interpreter finalisation tears modules down
    under such a thread, and a numpy/BLAS call in flight then segfaults (seen: signal 11 after
    SIGTERM on a loaded box). Everything is saved and flushed by now, so leave without it."""
    if any(t.name == TRAIN_THREAD and t.is_alive() for t in threading.enumerate()):
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(0)
