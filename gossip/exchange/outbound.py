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
(the delta rule takes out what a push moved me while my round was out). A draw waits as a
dialled partner is waited for: the round's quorum grace cuts it. One whose push did not come
in time (a slow link: it pushes less often than I run rounds) still answers for the radius, by
the distance of its latest push to my model then (`PushDistances`): one distance per draw, as a
dialled partner gives, so that the push bound knows it however slow its link.

What a hostile insider can do with it is what a dialled one can do with its answers: it is
drawn at random, as often as any other member, it cannot tell which of its pushes will be
taken as an answer, and its distances join my window at my rounds, with my group's (the
radius grows by at most `push_guard.GROWTH` a round; its median keeps one liar from widening
it). Only members that pushed to me within `FRESH_S` are drawn: a flood of outbound-only
members that never push takes no place in my rounds.
"""

from __future__ import annotations

import math
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable

# A member that pushed this recently may be drawn: an outbound-only member pushes once per
# round of its own, about as often as I run mine
FRESH_S = 30.0
MAX_TRACKED = 4096  # senders remembered (the member table holds at most 1,024 others)


class PushDistances:
    """The distance of each sender's latest push to my model (event loop only: no lock)."""

    def __init__(
        self, *, fresh_s: float = FRESH_S, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.fresh_s, self._clock = fresh_s, clock
        self._last: OrderedDict[str, tuple[float, float]] = OrderedDict()  # sender -> (t, d)
        self.drawn = 0  # distances of drawn members taken into my radius this way (tests)

    def pushed(self, sender: str, distance: float) -> None:
        """`sender` pushed a model `distance` from mine (a non-finite one: forgotten)."""
        self._last.pop(sender, None)
        if math.isfinite(distance):
            self._last[sender] = (self._clock(), float(distance))
            while len(self._last) > MAX_TRACKED:
                self._last.popitem(last=False)

    def fresh(self) -> set[str]:
        """The senders whose latest push is fresh: those my rounds may draw."""
        since = self._clock() - self.fresh_s
        return {s for s, (t, _) in self._last.items() if t >= since}

    def of(self, senders: Iterable[str]) -> list[float]:
        """The fresh distances of these drawn senders, one each: for my round's radius."""
        since = self._clock() - self.fresh_s
        out = []
        for s in senders:
            entry = self._last.get(s)
            if entry is not None and entry[0] >= since:
                out.append(entry[1])
        self.drawn += len(out)
        return out
