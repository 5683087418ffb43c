"""Outbound-only partners: my round draws them like any member; their latest push answers it.

Nobody can dial an outbound-only member (`reach = outbound` in its signed meta: behind a NAT),
so no round of mine ever asked it, and the push bound learnt distances only from my rounds'
answers (gossip/robust/push_guard.py). Its pushes were judged against a radius that never
included it: in a swarm that had converged before it joined, every one of them was refused,
its shard never reached the swarm, and its model, trained on data the others never mixed in,
stayed 20-40 radii away for good (docs/benchmarks.md, "Behind a NAT").

So an average round draws its partners uniformly over the dialable members *and* the
outbound-only ones that pushed to me lately (`PeerDirectory.sample_partners`). One drawn is
not dialled: its answer, as far as the radius goes, is the distance of its latest push to my
model then (`PushDistances.of`), which joins the dialled answers' in the guard's window, one
per draw as a dialled partner gives; the push itself is judged and mixed as every push is. What
a hostile insider can do with it is what a dialled one can do with its answers:

- it enters the window only when my round draws it, at random, as often as any other member,
  and whatever distance it pushes from counts as a lying answer's would (the guard's median
  keeps one liar from widening the radius);
- its distance joins the window at my rounds, with my group's, never between them: the radius
  still grows by at most `push_guard.GROWTH` an own round;
- only members that pushed to me within `FRESH_S` are drawn: a flood of outbound-only members
  that never push takes no place in my rounds, and a draw never waits.
"""

from __future__ import annotations

import math
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable

# A push this recent stands for its sender's model: an outbound-only member pushes once per
# round of its own, about as often as I run mine; older, its sender is not drawn
FRESH_S = 30.0
MAX_TRACKED = 4096  # senders remembered (the member table holds at most 1,024 others)


class PushDistances:
    """The distance of each sender's latest push to my model (event loop only: no lock)."""

    def __init__(
        self, *, fresh_s: float = FRESH_S, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.fresh_s, self._clock = fresh_s, clock
        self._last: OrderedDict[str, tuple[float, float]] = OrderedDict()  # sender -> (t, d)
        self.drawn = 0  # outbound-only answers taken into my radius (status, tests)

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
        """The fresh distances of these (drawn) senders, one each: their answers to my round."""
        since = self._clock() - self.fresh_s
        out = []
        for s in senders:
            entry = self._last.get(s)
            if entry is not None and entry[0] >= since:
                out.append(entry[1])
        self.drawn += len(out)
        return out
