"""The local learning rate: scheduled on the swarm's step counter, scaled with the swarm.
Imports no other room of node/train.

    lr = --lr x scale(n) x schedule(step)

- `schedule.py`: `LRSchedule`, the lr as a pure function of the step counter (`--lr-schedule
  constant|cosine|linear`, `--lr-warmup`, `--lr-floor`, `--lr-decay-steps`), so that a joiner
  continues the swarm's schedule and a checkpoint resumes it.
- `scale.py`: `SwarmLR`, the lr scaled with the swarm size (`--lr-scale none|sqrt|linear|
  adaptive`), elastic as peers come and go, with a warm-up (the same `--lr-warmup`).
- `gain.py`: `GainRatio` and `HalfBatchProbe`, the gain ratio measured from the peer's own
  gradient noise, which `adaptive` scales by.
"""

from swarmnode.node.train.lr.gain import GainRatio, HalfBatchProbe
from swarmnode.node.train.lr.scale import RULES, SwarmLR
from swarmnode.node.train.lr.schedule import DEFAULT_FLOOR, SCHEDULES, LRSchedule, lr_factor

__all__ = [
    "DEFAULT_FLOOR",
    "RULES",
    "SCHEDULES",
    "GainRatio",
    "HalfBatchProbe",
    "LRSchedule",
    "SwarmLR",
    "lr_factor",
]
