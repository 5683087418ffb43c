"""Outbound-only partners: my round draws them like any member, and their next push answers it.

Nobody can dial an outbound-only member (`reach = outbound` in its signed meta: behind a NAT),
so no round of mine ever asked it. Its pushes were then judged against a push radius learnt
from the dialled partners alone (gossip/robust/push_guard.py), and the consensus my rounds keep
(gossip/robust/consensus.py) never held its model: in a swarm that had converged before it
joined, its pushes were refused, or cut as pulling away from the consensus until its sender was
distrusted; its shard never reached the swarm, and its model, trained on data the others never
mixed in, stayed 20-40 radii away (docs/benchmarks.md, "Behind a NAT").

So an average round draws its partners uniformly over the dialable members *and* the
outbound-only ones that pushed to me lately (`PeerDirectory.sample_partners`); one drawn is not
dialled but awaited: the first model it pushes to me while my round is out is that round's
answer (`Exchanger.pushpull_many`), taken into the radius, the bound on answers, the mean and
the consensus like a dialled partner's. The push is mixed as a push besides: a dialled
partner's model reaches me both ways too, by its answers to my rounds and by its own pushes
(the delta rule takes out what a push moved me while my round was out). A draw waits
as a dialled partner is waited for: the round's quorum grace cuts it, and the push that comes
later is an ordinary push. What a hostile insider can do with it is what a dialled one can do
with its answers: it is drawn at random, as often as any other member, and it cannot tell
which of its pushes will be taken as an answer.

`RecentPushers` is who may be drawn: only members that pushed to me within `FRESH_S`, so a
flood of outbound-only members that never push takes no place in my rounds.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable

# A member that pushed this recently may be drawn: an outbound-only member pushes once per
# round of its own, about as often as I run mine
FRESH_S = 30.0
MAX_TRACKED = 4096  # senders remembered (the member table holds at most 1,024 others)


class RecentPushers:
    """When each sender last pushed to me (event loop only: no lock)."""

    def __init__(
        self, *, fresh_s: float = FRESH_S, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.fresh_s, self._clock = fresh_s, clock
        self._last: OrderedDict[str, float] = OrderedDict()  # sender -> its last push

    def pushed(self, sender: str) -> None:
        self._last.pop(sender, None)
        self._last[sender] = self._clock()
        while len(self._last) > MAX_TRACKED:
            self._last.popitem(last=False)

    def fresh(self) -> set[str]:
        """The senders that pushed to me within `fresh_s`: those my rounds may draw."""
        since = self._clock() - self.fresh_s
        return {s for s, t in self._last.items() if t >= since}
