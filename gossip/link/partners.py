"""Which partners a round talks to: proven ones first, a bounded share of the others.

Per-address caps and back-off bound what one address costs, not what many do: an attacker with
many addresses can fill a member table with members that accept a connection and never answer,
and uniform sampling would then spend nearly every honest round on one of them. The bound and
its reason: docs/security.md ("Bounds on tables, bodies and partners"); the figures:
docs/benchmarks.md ("Hostile insiders").

A partner is *proven* when it has answered us and its latest request was answered too
(`Backoff.proven`): a sybil never is, an honest peer is after its first exchange. `PartnerChoice`
picks up to k partners with at most about `share` x k that are not proven (rounded at random,
so a group of 3 explores one newcomer a round and a group of 1 one round in 3), the rest
among the proven. Exploring is how a newcomer is found, so it never stops; but its rate follows
what exploring found lately: the share is scaled by the fraction of recent newcomers that
turned out to answer (down to `min_trust`), so among a thousand silent members a peer explores
one round in ten, not every round. While newcomers do answer (a young swarm: nobody is proven
yet) every free slot may take one.
"""

from __future__ import annotations

import random
import time
from collections import deque
from collections.abc import Callable, Sequence
from typing import TypeVar

T = TypeVar("T")

SHARE = 1.0 / 3.0  # partners of a round that may be unproven (one of a group of 3)
MIN_TRUST = 0.1  # the share is scaled down to this fraction at worst: exploring never stops
JUDGED = 16  # explorations remembered
JUDGE_AFTER_S = 10.0  # a newcomer still unproven this long after it was picked did not answer


class PartnerChoice:
    """Picks partners (anything with an address) among candidates; `proven(addr)` says whom
    a round may rely on. Single-threaded (the event loop's)."""

    def __init__(
        self,
        proven: Callable[[str], bool],
        failing: Callable[[str], bool],
        rng: random.Random,
        *,
        share: float = SHARE,
        min_trust: float = MIN_TRUST,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if not 0 < share <= 1 or not 0 < min_trust <= 1:
            raise ValueError(f"`share` {share} and `min_trust` {min_trust} must be in (0, 1]")
        self.proven, self.failing, self.rng = proven, failing, rng
        self.share, self.min_trust, self.clock = share, min_trust, clock
        self._pending: dict[str, float] = {}  # newcomers picked, not judged yet -> when
        self._judged: deque[bool] = deque(maxlen=JUDGED)  # did they answer?
        self.explored = 0

    def trust(self) -> float:
        """The fraction of recent newcomers that answered (1 before any is judged)."""
        self._judge()
        if not self._judged:
            return 1.0
        return max(self.min_trust, sum(self._judged) / len(self._judged))

    def pick(
        self,
        candidates: Sequence[T],
        k: int,
        addr: Callable[[T], str],
        pick_proven: Callable[[list[T], int], list[T]] | None = None,
    ) -> list[T]:
        """Up to k distinct candidates: uniformly within the unproven, and within the proven
        too unless `pick_proven(pool, n)` picks those (link-aware sampling)."""
        if k <= 0 or not candidates:
            return []
        old = [c for c in candidates if self.proven(addr(c))]
        new = [c for c in candidates if not self.proven(addr(c))]
        trust = self.trust()
        want = k * self.share * trust
        n_new = int(want) + (self.rng.random() < want - int(want))
        if trust >= 0.5:  # newcomers mostly answer (a young swarm): fill what the proven leave
            n_new = max(n_new, k - len(old))
        n_new = min(n_new, len(new), k)
        n_old = min(k - n_new, len(old))
        chosen = pick_proven(old, n_old) if pick_proven is not None else self.rng.sample(old, n_old)
        picked = chosen + self.rng.sample(new, n_new)
        now = self.clock()
        for c in picked[len(chosen) :]:
            self._pending.setdefault(addr(c), now)
        self.explored += n_new
        self.rng.shuffle(picked)  # callers may take the first few
        return picked

    def _judge(self) -> None:
        now = self.clock()
        for a, since in list(self._pending.items()):
            if self.proven(a):
                self._judged.append(True)
            elif self.failing(a) or now - since > JUDGE_AFTER_S:
                self._judged.append(False)
            else:
                continue
            del self._pending[a]
