"""The training thread's side of the exchange: what a received model does to ours, and the
check on what a mix did. Imports no other room of node/train.

- `mixes.py`: `MixAccumulator`, received models folded into one pending update that the
  training thread applies between two steps; `OuterStep`, the outer step (momentum) on a
  round's progress; `axpby`, the one-pass fold.
- `collapse.py`: `CollapseGuard`, a mix that kills hidden units, or makes the loss jump and stay
  there, is rolled back and its senders named.
"""

from swarmnode.node.train.mixing.collapse import CollapseGuard, dead_fraction
from swarmnode.node.train.mixing.mixes import MixAccumulator, OuterStep

__all__ = ["CollapseGuard", "MixAccumulator", "OuterStep", "dead_fraction"]
