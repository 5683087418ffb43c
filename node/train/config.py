"""`NodeConfig`: everything one peer needs to know, in one validated dataclass.

The CLI builds it from argparse (`swarmnode.node.cli.cmd_start`), tests build it directly. The peer service
extends it (listen address, seeds, exchange settings) by subclassing or adding fields with
defaults, so a config built for a single-peer run stays valid.
"""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from swarmnode.node.train.data import Partition, check_tau, parse_partition, parse_shard
from swarmnode.node.train.errors import ConfigError
from swarmnode.node.train.lr import DEFAULT_FLOOR, SCHEDULES, LRSchedule
from swarmnode.node.train.user_code import describe

# Defaults chosen so that a plain `swarmnode start` reaches >= 96% test accuracy on the bundled
# digits in under a second of training on one CPU core. Swept over 12 seeds: the final test
# accuracy was 96.7-97.2% for every seed. mlp:128 ended as low as 95.6% for some seeds (constant-lr
# SGD wanders at the end; the wider layer damps it at little cost on this tiny input). With the
# 100-step lr warm-up that came with the schedule: 96.4-97.2% final, and the same late-window mean
# (the last sixth of the evaluations) as without, 96.9% over the 12 seeds. Under the `auto`
# schedule (cosine to step 1500): 96.7-97.2% final, against 96.7-97.2% constant, the same 12 seeds.
DEFAULT_MODEL = "mlp:512"
DEFAULT_STEPS = 1500
DEFAULT_BATCH_SIZE = 32
DEFAULT_LR = 0.05
DEFAULT_OPTIMIZER = "sgd"
DEFAULT_MOMENTUM = 0.9
DEFAULT_EVAL_EVERY = 100
DEFAULT_CHECKPOINT_EVERY = 500
DEFAULT_KEEP_CHECKPOINTS = 3
# The lr schedule (node/train/lr/schedule.py). The warm-up is also the lr scale's ramp after
# joins (node/train/lr/scale.py), where 100 was its default before there was a schedule.
# `auto`: cosine to the run's horizon (`lr_decay_steps`, else `steps`), constant where there is
# none (`steps` 0, train until stopped) or where it ends inside the warm-up. Chosen on issue 30's
# portfolio (docs/benchmarks.md, "The lr default"): cosine removed the conv net's late single-peer
# collapses (the robust worst peer at 8 peers 74.0 / 68.7% constant, 80.5 / 81.0% cosine) and
# stayed within 0.5 points of constant on both MLPs. A run with no end has no horizon to decay
# to; it keeps its lr, as a warm-up-stable-decay run does until its decay is set.
DEFAULT_LR_SCHEDULE = "auto"
LR_SCHEDULES = ("auto", *SCHEDULES)  # what `lr_schedule` accepts; `lr_kind` is what runs
DEFAULT_LR_WARMUP = 100
# tau of the logit-adjusted loss on a label-skewed shard (node/train/data/label_prior.py)
DEFAULT_LOGIT_ADJUST = 0.5


@dataclass
class NodeConfig:
    """Settings of one training peer. `validate()` raises `ConfigError` on the first bad value."""

    # A spec string (`mlp:512`, `own_model:build`: node/train/sources.py); from Python also a
    # model object or factory, and a data function or arrays (`swarmnode.Peer`).
    model: Any = DEFAULT_MODEL
    data: Any = "digits"
    steps: int = DEFAULT_STEPS
    batch_size: int = DEFAULT_BATCH_SIZE
    lr: float = DEFAULT_LR
    optimizer: str = DEFAULT_OPTIMIZER
    momentum: float = DEFAULT_MOMENTUM
    # lr(step) = lr x schedule(step) on the swarm's step counter: a linear warm-up over
    # lr_warmup steps from step 0, then (cosine, linear) a decay to lr_floor x lr at step
    # lr_decay_steps (0: at `steps`); past it, lr_floor x lr
    lr_schedule: str = DEFAULT_LR_SCHEDULE
    lr_warmup: int = DEFAULT_LR_WARMUP
    lr_floor: float = DEFAULT_FLOOR
    lr_decay_steps: int = 0
    weight_decay: float = 0.0
    logit_adjust: float = DEFAULT_LOGIT_ADJUST
    device: str = "auto"
    seed: int = 0
    eval_every: int = DEFAULT_EVAL_EVERY
    checkpoint_dir: Path | None = None
    checkpoint_every: int = DEFAULT_CHECKPOINT_EVERY
    keep_checkpoints: int = DEFAULT_KEEP_CHECKPOINTS
    summary_json: Path | None = None
    shard: tuple[int, int] = (0, 1)
    partition: Partition = field(default_factory=lambda: Partition("iid"))

    def __post_init__(self) -> None:
        # Accept the CLI's string forms too, so callers need not pre-parse.
        if isinstance(self.shard, str):
            self.shard = parse_shard(self.shard)
        if isinstance(self.partition, str):
            self.partition = parse_partition(self.partition)
        if isinstance(self.checkpoint_dir, str):
            self.checkpoint_dir = Path(self.checkpoint_dir)
        if isinstance(self.summary_json, str):
            self.summary_json = Path(self.summary_json)

    def validate(self) -> NodeConfig:
        # A setting is named `in backquotes`, by its field: the front the caller used (the
        # CLI's flag, a Python keyword) names it their way (swarmnode.node.settings.naming).
        _positive("steps", self.steps, allow_zero=True)
        _positive("batch_size", self.batch_size)
        _positive("eval_every", self.eval_every)
        _positive("checkpoint_every", self.checkpoint_every)
        _positive("keep_checkpoints", self.keep_checkpoints)
        # numpy's seeding refuses negatives (and would crash deep in the trainer build).
        _positive("seed", self.seed, allow_zero=True)
        if not (self.lr > 0 and self.lr < float("inf")):
            raise ConfigError(f"`lr` must be a positive number, got {self.lr}")
        self._check_schedule()
        if not 0 <= self.momentum < 1:
            raise ConfigError(f"`momentum` must be in [0, 1), got {self.momentum}")
        try:
            check_tau(self.logit_adjust)
        except ValueError as exc:
            raise ConfigError(f"`logit_adjust`: {exc}") from None
        if not 0 <= self.weight_decay < float("inf"):
            raise ConfigError(f"`weight_decay` must be >= 0, got {self.weight_decay}")
        index, count = self.shard
        if count < 1 or not 0 <= index < count:
            raise ConfigError(f"`shard` {index}/{count}: need COUNT >= 1 and 0 <= INDEX < COUNT")
        self._check_paths()
        return self

    def _check_schedule(self) -> None:
        if self.lr_schedule not in LR_SCHEDULES:
            raise ConfigError(
                f"`lr_schedule` must be one of {', '.join(LR_SCHEDULES)}, got {self.lr_schedule!r}"
            )
        _positive("lr_warmup", self.lr_warmup, allow_zero=True)
        _positive("lr_decay_steps", self.lr_decay_steps, allow_zero=True)
        floor = self.lr_floor
        if isinstance(floor, bool) or not (isinstance(floor, (int, float)) and 0 < floor <= 1):
            raise ConfigError(
                f"`lr_floor` is the decay's last lr as a fraction of `lr`, in (0, 1]; got "
                f"{self.lr_floor!r}"
            )
        if self.lr_schedule in ("auto", "constant"):  # auto decays only where it can
            return
        horizon = self.lr_horizon
        if horizon == 0:
            raise ConfigError(
                f"`lr_schedule` {self.lr_schedule} decays to its floor by a horizon, and with "
                "`steps` 0 (train until stopped) there is none: set `lr_decay_steps` N (or "
                "`steps` N)"
            )
        if horizon <= self.lr_warmup:
            which = "`lr_decay_steps`" if self.lr_decay_steps else "`steps`"
            raise ConfigError(
                f"`lr_schedule` {self.lr_schedule}: the decay ends at step {horizon} "
                f"({which}), not after the warm-up (`lr_warmup` {self.lr_warmup}): raise "
                f"{which} or lower `lr_warmup`"
            )

    @property
    def lr_horizon(self) -> int:
        """The step at which a decaying schedule reaches its floor (0: none)."""
        return self.lr_decay_steps or self.steps

    @property
    def lr_kind(self) -> str:
        """The schedule that runs: `lr_schedule`, with `auto` resolved to cosine where the
        horizon lies past the warm-up and to constant where it does not (or there is none)."""
        if self.lr_schedule != "auto":
            return self.lr_schedule
        return "cosine" if self.lr_horizon > self.lr_warmup else "constant"

    def schedule(self) -> LRSchedule:
        """The lr schedule these settings give (call after `validate()`)."""
        return LRSchedule(self.lr_kind, self.lr_warmup, self.lr_horizon, float(self.lr_floor))

    def _check_paths(self) -> None:
        # Checked now, not when first written: a bad --summary-json would otherwise surface only
        # after the whole run, and a bad --checkpoint-dir at the first checkpoint.
        if self.checkpoint_dir is not None:
            check_writable_dir(self.checkpoint_dir, "`checkpoint_dir`")
        if self.summary_json is not None:
            check_writable_file(self.summary_json, "`summary_json`")

    def to_json(self) -> dict[str, Any]:
        """A JSON-safe dict (for summaries and for recording in checkpoints)."""
        # model and data may be objects (a user's model, arrays): named, never copied
        d = asdict(replace(self, model=describe(self.model), data=describe(self.data)))
        d["partition"] = str(self.partition)
        d["shard"] = f"{self.shard[0]}/{self.shard[1]}"
        for key in ("checkpoint_dir", "summary_json"):
            d[key] = None if d[key] is None else str(d[key])
        return d


def _positive(name: str, value: int, allow_zero: bool = False) -> None:
    low = 0 if allow_zero else 1
    if not isinstance(value, int) or value < low:
        raise ConfigError(f"`{name}` must be an integer >= {low}, got {value!r}")


def check_writable_dir(path: Path, option: str) -> None:
    """`path` is, or can be created as, a directory this process can write in."""
    if os.path.exists(path) and not os.path.isdir(path):
        raise ConfigError(f"{option} {str(path)!r} exists and is not a directory")
    _check_creatable(Path(path), option, shown=Path(path))


def check_writable_file(path: Path, option: str) -> None:
    """`path` can be (over)written: it is not a directory and its directory can be written in."""
    if os.path.isdir(path):
        raise ConfigError(f"{option} {str(path)!r} is a directory, not a file path")
    _check_creatable(Path(path).parent, option, shown=Path(path))


def _check_creatable(directory: Path, option: str, shown: Path) -> None:
    # The nearest existing ancestor decides: missing directories below it are created later
    # (mkdir -p), so it must be a directory we may create entries in. os.path's checks, unlike
    # Path's, return False instead of raising on a component we may not search.
    base = os.path.abspath(directory)
    while not os.path.exists(base) and base != os.path.dirname(base):
        base = os.path.dirname(base)
    if not os.path.isdir(base):
        raise ConfigError(f"{option} {str(shown)!r}: {base!r} is not a directory")
    if not os.access(base, os.W_OK | os.X_OK):
        raise ConfigError(f"{option} {str(shown)!r}: directory {base!r} is not writable")
