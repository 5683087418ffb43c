"""The local learning rate, scaled with the swarm. Imports no other room of node/train.

- `scale.py`: `SwarmLR`, the lr scaled with the swarm size (`--lr-scale none|sqrt|linear|
  adaptive`), elastic as peers come and go, with a warm-up.
- `gain.py`: `GainRatio` and `HalfBatchProbe`, the gain ratio measured from the peer's own
  gradient noise, which `adaptive` scales by.
"""

from swarmnode.node.train.lr.gain import GainRatio, HalfBatchProbe
from swarmnode.node.train.lr.scale import SwarmLR

__all__ = ["GainRatio", "HalfBatchProbe", "SwarmLR"]
