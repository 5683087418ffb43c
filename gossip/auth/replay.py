"""`ReplayGuard`: fresh timestamps and unseen nonces, in bounded memory (gossip.auth.signer, operator)."""

from __future__ import annotations

import heapq
import threading
import time
from collections.abc import Callable

from swarmnode.gossip.errors import AuthError

MAX_SKEW_S = 30.0
MAX_NONCES = 1 << 17  # ~130k messages per skew window before the guard starts to fail closed


class ClockSkew(AuthError):
    """A message's timestamp is more than the window off this peer's clock: `skew` is this
    clock minus the sender's (positive: the sender's clock is behind), in seconds. `said`:
    the signer has logged it (once per sender), so the HTTP layer need not, every request."""

    def __init__(self, message: str, skew: float, said: bool = False) -> None:
        super().__init__(message)
        self.skew = skew
        self.said = said


class ReplayGuard:
    """Rejects stale timestamps and nonces already seen, in bounded memory. Thread-safe.

    A message is fresh when |now - ts| <= max_skew and its nonce is new. Nonces are kept until
    their timestamp leaves the window (after that, the skew check rejects a replay anyway). When
    more than `max_nonces` are live, the oldest are evicted and `floor` rises to their
    timestamp: anything at or below the floor is rejected, so eviction never re-opens a replay.
    """

    def __init__(
        self,
        max_skew: float = MAX_SKEW_S,
        max_nonces: int = MAX_NONCES,
        clock: Callable[[], float] = time.time,
    ) -> None:
        if not max_skew > 0 or max_nonces < 1:
            raise ValueError("max_skew must be > 0 and max_nonces >= 1")
        self.max_skew = max_skew
        self.max_nonces = max_nonces
        self.clock = clock
        self.floor = float("-inf")
        self._seen: set[bytes] = set()
        self._by_time: list[tuple[float, bytes]] = []  # min-heap of (timestamp, nonce)
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._seen)

    def check(self, ts: float, nonce: bytes) -> None:
        """Record (ts, nonce) or raise `AuthError` if it is stale, from the future, or seen."""
        now = self.clock()
        if abs(now - ts) > self.max_skew:
            raise ClockSkew(
                f"message timestamp is {now - ts:+.1f} s off this peer's clock "
                f"(max skew {self.max_skew:g} s)",
                now - ts,
            )
        with self._lock:
            self._expire(now)
            if ts <= self.floor:
                raise AuthError("message is older than the replay window can vouch for")
            if nonce in self._seen:
                raise AuthError("replayed message (nonce already seen)")
            self._seen.add(nonce)
            heapq.heappush(self._by_time, (ts, nonce))
            while len(self._seen) > self.max_nonces:
                old_ts, old = heapq.heappop(self._by_time)
                self._seen.discard(old)
                self.floor = max(self.floor, old_ts)

    def _expire(self, now: float) -> None:
        while self._by_time and self._by_time[0][0] < now - self.max_skew:
            _, old = heapq.heappop(self._by_time)
            self._seen.discard(old)
