"""What may be mixed: aggregation rules and the bounds on a received model. Imports no other
gossip room.

- `aggregate.py`: the rules, pure functions from n rows to one (`RULES`: Krum, Multi-Krum,
  median, trimmed mean, centered and self-centered clipping, mean), `krum_scores`.
- `fast.py`: fast paths of the coordinate-wise rules when every row is finite.
- `chunked.py`: distances and clipping between two large models in cache-sized chunks.
- `push_guard.py`: how far one pushed model may move this peer (`PushGuard`).
- `heading.py`: no model may pull this peer back along its own heading (`ss_clip_round`).
- `push_budget.py`: how much one sender may move this peer by pushes over time (a rate, a travel cap).
- `consensus.py`: what an `average` peer mixes of its group's answers (the consensus cut).
"""

from swarmnode.gossip.robust.aggregate import RULES, krum_scores
from swarmnode.gossip.robust.heading import ss_clip_round
from swarmnode.gossip.robust.push_guard import PushGuard

__all__ = ["RULES", "PushGuard", "krum_scores", "ss_clip_round"]
