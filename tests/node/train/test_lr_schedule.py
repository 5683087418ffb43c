"""The lr schedule (node/train/lr/schedule.py): the function as tables, its settings, and that it
lives on the swarm's step counter (a joiner continues it, a checkpoint resumes it)."""

from __future__ import annotations

import itertools
import math
import random
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from swarmnode.kernels.errors import SwarmnodeError
from swarmnode.node.cli import cmd_start
from swarmnode.node.cli.command import build_parser, main
from swarmnode.node.peer.api import Peer
from swarmnode.node.peer.state_sync import sync_from_swarm
from swarmnode.node.settings import PeerConfig
from swarmnode.node.train.build import build_trainer, resume
from swarmnode.node.train.checkpoint import save_checkpoint
from swarmnode.node.train.config import NodeConfig
from swarmnode.node.train.errors import ConfigError
from swarmnode.node.train.lr.scale import SwarmLR
from swarmnode.node.train.lr.schedule import LRSchedule, lr_factor
from swarmnode.node.train.trainer import Trainer
from swarmnode.node.train.worker import TrainingWorker

pytestmark = pytest.mark.timeout(60)

SMALL = dict(model="mlp:16", device="cpu", batch_size=32, shard=(1, 8), lr=0.05)


# --- the function ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kind", "warmup", "horizon", "floor", "step", "want"),
    [
        # constant: the lr as given at every step (no warm-up: a run naming no schedule
        # trains as before one existed)
        ("constant", 4, 0, 0.1, 0, 1.0),
        ("constant", 4, 0, 0.1, 10**6, 1.0),
        ("constant", 0, 0, 0.1, 0, 1.0),
        # a decay's warm-up: (step + 1) / W, so the first step already trains; then the peak
        ("linear", 4, 100, 0.1, 0, 0.25),
        ("linear", 4, 100, 0.1, 2, 0.75),
        ("cosine", 10, 110, 0.1, 0, 0.1),  # warm-up first, whatever the decay
        ("cosine", 10, 110, 0.1, 9, 1.0),
        # cosine: the peak at the end of the warm-up, halfway to the floor at the midpoint
        ("cosine", 10, 110, 0.1, 10, 1.0),
        ("cosine", 10, 110, 0.1, 60, 0.55),
        ("cosine", 0, 100, 0.0001, 50, 0.50005),
        ("cosine", 0, 100, 0.1, 25, 0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi / 4))),
        # linear: a straight line to the floor, reached at the horizon
        ("linear", 0, 100, 0.1, 0, 1.0),
        ("linear", 0, 100, 0.1, 50, 0.55),
        ("linear", 0, 100, 0.1, 99, 0.109),
        ("linear", 0, 100, 0.1, 100, 0.1),
        ("linear", 20, 120, 0.5, 70, 0.75),
        # past the horizon: the floor, for ever (a --steps 0 run past --lr-decay-steps)
        ("cosine", 0, 100, 0.1, 100, 0.1),
        ("cosine", 0, 100, 0.1, 10**6, 0.1),
        ("linear", 5, 100, 0.25, 10**6, 0.25),
        # a floor of 1: no decay at all
        ("cosine", 0, 100, 1.0, 50, 1.0),
    ],
)
def test_the_schedule_factor(kind, warmup, horizon, floor, step, want) -> None:
    assert lr_factor(step, kind, warmup, horizon, floor) == pytest.approx(want)
    assert LRSchedule(kind, warmup, horizon, floor).factor(step) == pytest.approx(want)


@pytest.mark.parametrize("kind", ["cosine", "linear"])
def test_a_decay_never_rises_and_stays_within_floor_and_peak(kind: str) -> None:
    s = LRSchedule(kind, warmup=50, horizon=1000, floor=0.1)
    after = [s.factor(step) for step in range(49, 1200)]
    assert all(a >= b for a, b in itertools.pairwise(after))
    assert after[0] == 1.0 and min(after) == pytest.approx(0.1) and min(after) > 0


@pytest.mark.parametrize(
    ("settings", "fragment"),
    [
        ({"lr_schedule": "step"}, "`lr_schedule` must be one of auto, constant, cosine, linear"),
        ({"lr_warmup": -1}, "`lr_warmup` must be an integer >= 0"),
        ({"lr_warmup": 1.5}, "`lr_warmup` must be an integer >= 0"),
        ({"lr_decay_steps": -5}, "`lr_decay_steps` must be an integer >= 0"),
        ({"lr_floor": 0.0}, "`lr_floor` is the decay's last lr as a fraction of `lr`, in (0, 1]"),
        ({"lr_floor": 1.5}, "`lr_floor`"),
        ({"lr_floor": math.nan}, "`lr_floor`"),
        ({"lr_floor": True}, "`lr_floor`"),
        # a decay needs a horizon: --steps 0 trains until stopped
        ({"lr_schedule": "cosine", "steps": 0}, "set `lr_decay_steps` N (or `steps` N)"),
        ({"lr_schedule": "linear", "steps": 0}, "`lr_decay_steps`"),
        # ... and one after the warm-up
        ({"lr_schedule": "cosine", "steps": 100}, "(`steps`), not after the warm-up"),
        ({"lr_schedule": "linear", "lr_decay_steps": 50}, "raise `lr_decay_steps`"),
    ],
)
def test_bad_schedule_settings_are_refused_naming_the_keys(settings: dict, fragment: str) -> None:
    with pytest.raises(ConfigError) as info:
        NodeConfig(**settings).validate()
    assert fragment in str(info.value)


def test_the_horizon_is_steps_unless_decay_steps_gives_one() -> None:
    assert NodeConfig(lr_schedule="cosine", steps=1500).validate().schedule() == LRSchedule(
        "cosine", 100, 1500, 0.1
    )
    forever = NodeConfig(lr_schedule="cosine", steps=0, lr_decay_steps=4000, lr_warmup=0)
    assert forever.validate().schedule() == LRSchedule("cosine", 0, 4000, 0.1)
    # a constant schedule needs no horizon, --steps 0 included
    assert NodeConfig(steps=0, lr_schedule="constant").validate().schedule() == LRSchedule(
        "constant", 100, 0, 0.1
    )


@pytest.mark.parametrize(
    ("settings", "runs"),
    [
        ({}, LRSchedule("cosine", 100, 1500, 0.1)),  # the defaults: 1500 steps
        ({"steps": 400, "lr_floor": 0.2}, LRSchedule("cosine", 100, 400, 0.2)),
        ({"steps": 0, "lr_decay_steps": 4000}, LRSchedule("cosine", 100, 4000, 0.1)),
        # no horizon, or one inside the warm-up: constant, where cosine itself is refused
        ({"steps": 0}, LRSchedule("constant", 100, 0, 0.1)),
        ({"steps": 100}, LRSchedule("constant", 100, 100, 0.1)),
        ({"steps": 50, "lr_warmup": 0}, LRSchedule("cosine", 0, 50, 0.1)),
    ],
)
def test_auto_the_default_decays_by_cosine_where_there_is_a_horizon(
    settings: dict, runs: LRSchedule
) -> None:
    cfg = NodeConfig(**settings).validate()
    assert cfg.lr_schedule == "auto" and cfg.schedule() == runs
    assert cfg.lr_kind == runs.kind


def test_the_cli_refuses_a_decay_without_a_horizon_with_exit_2(capsys) -> None:
    assert main(["start", "--lr-schedule", "cosine", "--steps", "0"]) == 2
    err = capsys.readouterr().err
    assert "--lr-decay-steps" in err and "--steps" in err and "\n" not in err.strip()


def test_print_config_shows_the_schedule(capsys) -> None:
    argv = ["start", "--lr-schedule", "linear", "--lr-floor", "0.05", "--print-config"]
    assert main(argv) == 0
    lines = capsys.readouterr().out.splitlines()
    for key, value in [("lr-schedule", '"linear"'), ("lr-floor", "0.05"), ("lr-warmup", "100")]:
        assert any(line.split()[:3] == [key, "=", value] for line in lines), key
    assert any(line.split()[:3] == ["lr-decay-steps", "=", "0"] for line in lines)


@pytest.mark.parametrize(
    ("settings", "rule"),
    [
        ({}, "sqrt"),  # the defaults: cosine to step 1500, so x sqrt(n) in a swarm
        ({"steps": 0}, "none"),  # a constant lr is not scaled: it spiked late when it was
        ({"lr_schedule": "constant"}, "none"),
        ({"lr_schedule": "linear"}, "sqrt"),
        ({"lr_scale": "linear", "steps": 0}, "linear"),  # a rule named is a rule run
        ({"lr_scale": "none"}, "none"),
    ],
)
def test_auto_scales_the_lr_with_the_swarm_only_where_it_decays(settings: dict, rule: str) -> None:
    cfg = PeerConfig(**settings).validate()
    assert cfg.lr_rule == rule


# --- in the trainer and the worker -------------------------------------------------------


def _trainer(**kw: Any) -> Trainer:
    trainer, _, _ = build_trainer(NodeConfig(**{**SMALL, **kw}).validate())
    return trainer


def _lrs(t: Trainer, n: int) -> list[float]:
    """The lr each of the next `n` steps took."""
    out = []
    for _ in range(n):
        t.step()
        out.append(t.optimizer.lr)
    return out


def test_each_step_takes_the_peak_lr_times_the_schedule() -> None:
    t = _trainer(lr_schedule="cosine", steps=300, lr_warmup=20)
    want = [0.05 * LRSchedule("cosine", 20, 300, 0.1).factor(s) for s in range(320)]
    assert _lrs(t, 320) == pytest.approx(want)
    assert t.optimizer.lr == pytest.approx(0.005)  # past the horizon: the floor


def test_a_constant_schedule_leaves_the_lr_and_the_steps_as_before() -> None:
    plain = _trainer(lr_schedule="constant")  # --lr-warmup (100) warms up a decay, not this
    assert plain.lr_schedule.trivial
    assert _lrs(plain, 30) == [0.05] * 30


def test_the_schedule_composes_with_the_swarm_scale() -> None:
    t = _trainer(lr_schedule="linear", steps=200, lr_warmup=0)
    w = TrainingWorker(t, eval_every=10_000, max_steps=100)
    w.lr_scale = SwarmLR("linear", max_n=8, warmup=0)
    w.lr_scale.set_size(4)
    w.start()
    assert w.join(timeout=30) and w.error is None
    # the 100th step (counter 99): --lr x 4 peers x the linear decay at 99 of 200
    assert t.optimizer.lr == pytest.approx(0.05 * 4 * (0.1 + 0.9 * (1 - 99 / 200)))


@dataclass
class _Member:
    peer_id: str
    addr: str


@dataclass
class _Donor:
    """A swarm of one live peer whose model and step counter a joiner pulls."""

    trainer: Trainer

    def live_peers(self) -> list[_Member]:
        return [_Member("donor", "10.0.0.1:7070")]

    async def pull_many(self, picked: Any, failures: Any, timeout: Any = None) -> list:
        return [("donor", self.trainer.step_count, self.trainer.model.params.data.copy())]


@dataclass
class _Joiner:
    trainer: Trainer
    membership: Any
    exchanger: Any
    store: Any = None
    rng: random.Random = field(default_factory=lambda: random.Random(0))
    resumed: Any = None


@dataclass
class _Store:
    trainer: Trainer

    async def load(self, vec: np.ndarray) -> None:
        self.trainer.model.params.data[...] = vec


async def test_a_joiner_continues_the_swarms_schedule_from_its_step() -> None:
    settings = dict(lr_schedule="cosine", steps=1000, lr_warmup=100)
    swarm = _trainer(seed=0, **settings)
    _lrs(swarm, 700)
    joiner = _trainer(seed=1, **settings)  # a fresh peer: its own counter at 0
    donor = _Donor(swarm)
    node = _Joiner(joiner, donor, donor)
    node.store = _Store(joiner)
    await sync_from_swarm(node, timeout=5)  # the join's state sync: model and step counter
    assert joiner.step_count == 700
    (first,) = _lrs(joiner, 1)
    (swarms,) = _lrs(swarm, 1)
    # the swarm's lr at step 700, not a warm-up from zero nor the peak
    assert first == swarms == pytest.approx(0.05 * LRSchedule("cosine", 100, 1000).factor(700))


def test_a_resumed_peer_takes_the_lr_and_the_steps_of_the_uninterrupted_one(
    tmp_path: Path,
) -> None:
    settings = dict(lr_schedule="linear", steps=400, lr_warmup=50, seed=3)
    whole = _trainer(**settings)
    uninterrupted = _lrs(whole, 400)
    first = _trainer(**settings)
    _lrs(first, 130)  # stopped in the warm-up's wake, mid-epoch
    save_checkpoint(tmp_path, first.state())
    cfg = NodeConfig(**{**SMALL, **settings}, checkpoint_dir=tmp_path).validate()
    second, _, _ = build_trainer(cfg)
    assert resume(second, cfg) is not None and second.step_count == 130
    assert _lrs(second, 270) == uninterrupted[130:]
    np.testing.assert_array_equal(second.model.params.data, whole.model.params.data)


def test_the_config_file_and_the_python_api_take_the_same_settings(tmp_path: Path) -> None:
    path = tmp_path / "peer.toml"
    path.write_text('lr-schedule = "linear"\nlr-decay-steps = 5000\nsteps = 0\nlr-floor = 0.2\n')
    args = build_parser().parse_args(["start", "--config", str(path)])
    from_file = cmd_start.config_from(cmd_start.resolve(args, {})).schedule()
    settings = dict(lr_schedule="linear", lr_decay_steps=5000, steps=0, lr_floor=0.2)
    from_api = Peer("mlp:16", **settings).config.validate().schedule()
    assert from_file == from_api == LRSchedule("linear", 100, 5000, 0.2)


@pytest.mark.parametrize(
    "args", [("step", 0, 0), ("cosine", -1, 10), ("linear", 0, 10, 0.0), ("cosine", 10, 5)]
)
def test_a_bad_schedule_is_a_config_error_and_still_a_value_error(args: tuple) -> None:
    # one rooted hierarchy: the CLI prints a SwarmnodeError as one line; ValueError kept for
    # a caller that caught it before
    with pytest.raises(ConfigError) as info:
        LRSchedule(*args)
    assert isinstance(info.value, ValueError) and isinstance(info.value, SwarmnodeError)
