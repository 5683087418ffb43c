"""`LRSchedule`: the learning rate as a pure function of the swarm's step counter.

    lr(step) = peak x factor(step),   factor = warm-up x decay   (constant: factor = 1)

- warm-up (cosine and linear): factor rises linearly over the first `warmup` steps of the counter, (step + 1) /
  warmup, so that step 0 already trains (at peak / warmup) and step warmup - 1 at the peak;
- decay (`cosine` or `linear`): from the peak at the end of the warm-up down to `floor` x peak
  at step `horizon`, and `floor` x peak after it; `constant` does not decay.

`step` is the counter *before* the step is taken (`Trainer.step_count`): the swarm's counter,
which a joiner inherits from its donors (node/peer/state_sync.py) and a checkpoint restores.
Nothing else is state, so a joiner continues the swarm's schedule, and a resumed peer the
schedule it left, with nothing to record or exchange. A joiner whose counter starts past the
warm-up therefore does not warm up from zero; the lr scale's ramp after a join
(node/train/lr/scale.py, the same `--lr-warmup` steps) is what eases a grown swarm in.

Why a floor, 0.1 by default: the lr that ends a decay is where a run's accuracy is read, and
a swarm keeps mixing and admitting joiners there; at zero a peer would stop following its own
data between mixes (and the optimizer refuses a zero rate), past the horizon of a `--steps 0`
run it would stop learning at all. Ten percent of the peak is the common choice of large runs
(cosine to 0.1 x peak: Hoffmann et al. 2022, Touvron et al. 2023) and keeps the late steps an
order of magnitude quieter than the peak, which is what the late-window accuracy needs.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from swarmnode.node.train.errors import ConfigError

SCHEDULES = ("constant", "cosine", "linear")
DEFAULT_FLOOR = 0.1


class ScheduleError(ConfigError, ValueError):
    """An lr schedule that cannot be followed; a ValueError too, as it was before it had a
    class of its own (a caller may catch that)."""


def lr_factor(step: int, kind: str, warmup: int, horizon: int, floor: float) -> float:
    """The schedule's factor of the peak lr for the step taken at counter `step` (>= 0).
    `constant` is 1 at every step: it warms up nothing (a swarm's early mixes of unlike
    models already hold its lr down; ramping it too made the collapse guard read honest
    mixes as collapses), so a run that names no schedule trains as it did before one existed."""
    if kind == "constant":
        return 1.0
    warm = min(1.0, (step + 1) / warmup) if warmup > 0 else 1.0
    span = horizon - warmup
    done = min(1.0, max(0.0, (step - warmup) / span)) if span > 0 else 1.0
    if kind == "cosine":
        shape = 0.5 * (1.0 + math.cos(math.pi * done))
    else:  # linear
        shape = 1.0 - done
    return warm * (floor + (1.0 - floor) * shape)


@dataclass(frozen=True)
class LRSchedule:
    """`kind` (constant, cosine, linear), `warmup` steps, the decay's `horizon` (the step at
    which it reaches the floor; unused by constant) and `floor` (a fraction of the peak)."""

    kind: str = "constant"
    warmup: int = 0
    horizon: int = 0
    floor: float = DEFAULT_FLOOR

    def __post_init__(self) -> None:
        if self.kind not in SCHEDULES:
            raise ScheduleError(
                f"lr schedule must be one of {', '.join(SCHEDULES)}, got {self.kind!r}"
            )
        if self.warmup < 0 or self.horizon < 0:
            raise ScheduleError(f"need warmup, horizon >= 0, got {self.warmup} and {self.horizon}")
        if not 0.0 < self.floor <= 1.0:  # a zero rate is refused by the optimizer
            raise ScheduleError(f"lr floor must be in (0, 1], got {self.floor}")
        if self.decays and self.horizon <= self.warmup:
            raise ScheduleError(
                f"a {self.kind} decay needs its horizon ({self.horizon}) past the warm-up "
                f"({self.warmup})"
            )

    @property
    def decays(self) -> bool:
        return self.kind != "constant"

    @property
    def trivial(self) -> bool:
        """1 at every step: the trainer can leave the optimizer's lr alone."""
        return self.kind == "constant"

    def factor(self, step: int) -> float:
        return lr_factor(step, self.kind, self.warmup, self.horizon, self.floor)

    @property
    def print(self) -> str:
        """What a peer's member record says of its schedule, for a joiner to compare with
        its own: "constant", or the decay and its horizon ("cosine:3000")."""
        return f"{self.kind}:{self.horizon}" if self.decays else self.kind

    def __str__(self) -> str:
        if not self.decays:
            return self.kind  # it warms up nothing (`lr_factor`)
        return f"{self.kind}, warm-up {self.warmup} to {self.floor:g} x peak at step {self.horizon}"
