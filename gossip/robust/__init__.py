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

from swarmnode.gossip.robust.aggregate import RULES, SELF_CENTERED, krum_scores, min_peers
from swarmnode.gossip.robust.chunked import distance, norm
from swarmnode.gossip.robust.consensus import (
    AWAY_LIMIT,
    bound_answers,
    cut_away,
    cut_shift,
    mean_into,
)
from swarmnode.gossip.robust.heading import BACKWARD_LIMIT, bound_push, ss_clip_round
from swarmnode.gossip.robust.push_budget import PushBudget
from swarmnode.gossip.robust.push_guard import PUSH_CLIP_SHARE, PushGuard

__all__ = [
    "AWAY_LIMIT",
    "BACKWARD_LIMIT",
    "PUSH_CLIP_SHARE",
    "RULES",
    "SELF_CENTERED",
    "PushBudget",
    "PushGuard",
    "bound_answers",
    "bound_push",
    "cut_away",
    "cut_shift",
    "distance",
    "krum_scores",
    "mean_into",
    "min_peers",
    "norm",
    "ss_clip_round",
]
