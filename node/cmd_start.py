"""`swarmnode start`: train one peer, print progress, checkpoint, resume, and write a summary.

For now a peer trains alone on its shard of the data. The peer service (listen/join/exchange)
plugs in here later: it reuses `add_training_options`, `config_from_args` and `build_worker`,
and drives the same `TrainingWorker` from its event loop.
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TextIO

from node import config as defaults
from node.checkpoint import load_latest, save_checkpoint
from node.config import NodeConfig
from node.data import Dataset, load_dataset
from node.errors import CheckpointError, ConfigError
from node.progress import ProgressPrinter, format_summary, write_summary_json
from node.shard import parse_partition, parse_shard, shard_indices
from node.trainer import Trainer
from node.worker import TrainingWorker

HELP = "train one peer on the bundled digits (or any data set) and report test accuracy"

DESCRIPTION = """\
Train one peer. With no options: an MLP on the bundled UCI digits, reaching >= 96% test
accuracy in seconds on one CPU core. Prints a progress line every --eval-every steps.
With --checkpoint-dir the run checkpoints every --checkpoint-every steps and resumes from the
newest readable checkpoint there. SIGINT/SIGTERM stop cleanly: a final checkpoint is saved and
the exit code is 0.
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


# --- the run ----------------------------------------------------------------------------------


def run_training(cfg: NodeConfig, out: TextIO | None = None) -> dict[str, Any]:
    """Train to `cfg.steps` (or until SIGINT/SIGTERM); return the summary dict."""
    out = out or sys.stdout
    t0 = time.perf_counter()
    cfg.validate()
    trainer, data, backend = build_trainer(cfg)
    n_params = int(trainer.model.params.data.size)
    _say(out, f"model {cfg.model} ({n_params:,} parameters) on {data.describe()}")
    _say(out, f"device {backend.describe()}; {trainer.n_samples} training samples in this shard")
    resumed = resume(trainer, cfg)
    if resumed is not None:
        _say(out, f"resumed from checkpoint step {trainer.step_count} ({resumed['_path']})")
    start_step = trainer.step_count

    def checkpoint(state: dict[str, Any]) -> None:
        state["meta"] = run_meta(cfg)
        save_checkpoint(cfg.checkpoint_dir, state, keep=cfg.keep_checkpoints)

    worker = TrainingWorker(
        trainer,
        X_test=data.X_test,
        y_test=data.y_test,
        eval_every=cfg.eval_every,
        max_steps=cfg.steps,
        device=backend.describe(),
        on_eval=ProgressPrinter(cfg.steps, out),
        on_checkpoint=checkpoint if cfg.checkpoint_dir is not None else None,
        checkpoint_every=cfg.checkpoint_every,
    )
    with _stop_on_signals(worker, out):
        worker.start()
        while not worker.join(0.25):  # short waits: lets the main thread run signal handlers
            pass
    if worker.error is not None:
        raise worker.error
    m = worker.metrics()
    if m.eval_step != trainer.step_count:  # stopped between two evaluations: measure the end
        m = worker.evaluate_now()
    if cfg.checkpoint_dir is not None and trainer.step_count > start_step:
        checkpoint(trainer.state())
    summary = {
        "test_accuracy": m.test_acc,
        "test_loss": m.test_loss,
        "steps": trainer.step_count,
        "steps_this_run": trainer.step_count - start_step,
        "resumed_from_step": start_step if resumed is not None else None,
        "samples_per_s": worker.steps_run * trainer.batch_size / worker.train_seconds
        if worker.train_seconds > 0
        else float("nan"),
        "device": backend.describe(),
        "wall_s": time.perf_counter() - t0,
        "model": cfg.model,
        "data": cfg.data,
        "n_params": n_params,
    }
    _say(out, format_summary(summary))
    if cfg.summary_json is not None:
        write_summary_json(cfg.summary_json, summary)
    return summary


@contextmanager
def _stop_on_signals(worker: TrainingWorker, out: TextIO) -> Iterator[None]:
    """First SIGINT/SIGTERM: stop after the current step (then checkpoint). A second: abort."""
    if threading.current_thread() is not threading.main_thread():
        yield  # signal handlers can only be installed from the main thread
        return
    sigs = [signal.SIGINT, signal.SIGTERM]
    previous = {s: signal.getsignal(s) for s in sigs}

    def handler(signum: int, _frame: Any) -> None:
        _say(out, f"{signal.Signals(signum).name}: stopping after the current step")
        worker.request_stop()
        for s in sigs:  # a second signal falls through to the previous behaviour
            signal.signal(s, previous[s])

    for s in sigs:
        signal.signal(s, handler)
    try:
        yield
    finally:
        for s in sigs:
            signal.signal(s, previous[s])


def _say(out: TextIO, line: str) -> None:
    print(line, file=out, flush=True)
