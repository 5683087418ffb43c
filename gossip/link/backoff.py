"""Back-off from partners that do not answer: members that never answer are sampled rarely.

A listed member may be a sybil that never answers (issue 10: an insider holding the swarm secret
can list up to `max_members_per_host` of them per address). Sampled uniformly, such members
waste the honest peers' rounds; so each failed request to an address keeps that address out of
sampling for a while, doubling with every failure in a row (`base` s, 2 `base`, ... at most
`cap` s, with jitter so that the peers' retries do not align), and any answer ends it at once.

Failures are counted per address and per kind of request, because a member may answer one and
refuse the other: `bulk` (the exchange's `params` and `pushpull`) and `control` (membership).
An error answer (4xx/5xx) counts as a failure too: a partner that refuses its exchanges costs
a round like one that is gone. What this never does is judge liveness: the failure detector
reads only heartbeats signed by their owner, so nobody can get an honest peer marked suspect or
dead by making our exchanges with it fail (by taking its exchange slots, say); a back-off only
lowers our own odds of picking that partner, for at most `cap` s, and a slow partner that
answers is never backed off.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable

BULK, CONTROL = "bulk", "control"
BULK_ROUTES = frozenset({"params", "pushpull"})
BASE_S = 1.0
CAP_S = 30.0
REMEMBER = 4096  # addresses kept; the table's cap (1,024 members) keeps them well below


def kind_of(route: str) -> str:
    return BULK if route in BULK_ROUTES else CONTROL


class Backoff:
    """Failures in a row, and the end of the current back-off, per (address, kind)."""

    def __init__(
        self,
        base: float = BASE_S,
        cap: float = CAP_S,
        *,
        clock: Callable[[], float] = time.monotonic,
        rng: random.Random | None = None,
    ) -> None:
        if not 0 < base <= cap:
            raise ValueError(f"back-off needs 0 < base <= cap, got {base}, {cap}")
        self.base, self.cap, self.clock = base, cap, clock
        self.rng = rng or random.Random()
        self._state: dict[tuple[str, str], tuple[int, float]] = {}  # -> (streak, until)

    def failed(self, addr: str, kind: str) -> None:
        key = (addr, kind)
        streak = self._state.pop(key, (0, 0.0))[0] + 1
        wait = min(self.cap, self.base * 2 ** min(streak - 1, 32)) * self.rng.uniform(0.5, 1.0)
        self._state[key] = (streak, self.clock() + wait)  # re-inserted: the newest last
        if len(self._state) > REMEMBER:
            del self._state[next(iter(self._state))]  # the longest quiet: it gets a fresh try

    def answered(self, addr: str, kind: str) -> None:
        self._state.pop((addr, kind), None)

    def streak(self, addr: str, kind: str) -> int:
        return self._state.get((addr, kind), (0, 0.0))[0]

    def waiting(self, addr: str, kind: str, min_streak: int = 1) -> bool:
        """Whether `addr` is backed off for `kind` now, after `min_streak` failures in a row."""
        streak, until = self._state.get((addr, kind), (0, 0.0))
        return streak >= min_streak and self.clock() < until
