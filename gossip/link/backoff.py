"""Back-off from partners that do not answer: members that never answer are sampled rarely.

A listed member may be a sybil that never answers (an insider holding the swarm secret can list
up to `max_members_per_host` of them per address). Sampled uniformly, such members
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

Proven partners: an address whose latest request of a kind was answered, having
been answered at least once, is `proven` for that kind. Back-off is per address, and an
attacker with many addresses lists a sybil per address and key: the samplers bound the share
of partners that are not proven (gossip/link/partners.py), and the transport gives a request to
a partner that is not a short deadline (gossip/link/stats.py), so a silent one cannot hold a
round for the whole of it.

Late partners: a partner that answers, but after the round went on without it (the exchange's
quorum grace, gossip/exchange/exchanger.py), is `late`: it stays proven (it is honest, only
slow) and is not a failure, but it is kept out of sampling for a while, `LATE_BASE_S` doubling
with each lateness in a row up to `LATE_CAP_S`, so that a partner slow again and again costs a
round one grace per back-off, not one per round; an answer in time (`on_time`) ends it.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable

BULK, CONTROL = "bulk", "control"
BULK_ROUTES = frozenset({"params", "pushpull"})
BASE_S = 1.0
CAP_S = 30.0
LATE_BASE_S = 2.0
LATE_CAP_S = 30.0
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
        self._answered: dict[tuple[str, str], None] = {}  # ever answered; the newest last
        self._late: dict[tuple[str, str], tuple[int, float]] = {}  # -> (streak, until)

    def failed(self, addr: str, kind: str) -> None:
        key = (addr, kind)
        streak = self._state.pop(key, (0, 0.0))[0] + 1
        wait = min(self.cap, self.base * 2 ** min(streak - 1, 32)) * self.rng.uniform(0.5, 1.0)
        self._state[key] = (streak, self.clock() + wait)  # re-inserted: the newest last
        if len(self._state) > REMEMBER:
            del self._state[next(iter(self._state))]  # the longest quiet: it gets a fresh try

    def answered(self, addr: str, kind: str) -> None:
        key = (addr, kind)
        self._state.pop(key, None)
        self._answered.pop(key, None)
        self._answered[key] = None
        if len(self._answered) > REMEMBER:
            del self._answered[next(iter(self._answered))]  # the longest silent

    def late(self, addr: str, kind: str) -> None:
        """`addr` answered after the round's grace: sampled less for a while (module doc)."""
        key = (addr, kind)
        streak = self._late.pop(key, (0, 0.0))[0] + 1
        wait = LATE_BASE_S * 2 ** min(streak - 1, 32)
        wait = min(LATE_CAP_S, wait) * self.rng.uniform(0.5, 1.0)
        self._late[key] = (streak, self.clock() + wait)
        if len(self._late) > REMEMBER:
            del self._late[next(iter(self._late))]

    def on_time(self, addr: str, kind: str) -> None:
        """`addr` answered within the round's grace: its lateness is over."""
        self._late.pop((addr, kind), None)

    def late_streak(self, addr: str, kind: str) -> int:
        return self._late.get((addr, kind), (0, 0.0))[0]

    def proven(self, addr: str, kind: str) -> bool:
        """Whether `addr` has answered a request of `kind`, and its latest one too."""
        key = (addr, kind)
        return key in self._answered and key not in self._state

    def proven_addrs(self, kind: str) -> set[str]:
        """Every address `proven` for `kind` (a set to test a whole table against at once)."""
        return {a for a, k in self._answered if k == kind and (a, k) not in self._state}

    def streak(self, addr: str, kind: str) -> int:
        return self._state.get((addr, kind), (0, 0.0))[0]

    def waiting(self, addr: str, kind: str, min_streak: int = 1) -> bool:
        """Whether `addr` is backed off for `kind` now, after `min_streak` failures in a row,
        or after being late (any streak: lateness is a measured answer, not a guess)."""
        now = self.clock()
        if now < self._late.get((addr, kind), (0, 0.0))[1]:
            return True
        streak, until = self._state.get((addr, kind), (0, 0.0))
        return streak >= min_streak and now < until
