"""What a request must do before it holds anything on a peer: deliver its body, on time.

The attack this answers (issue 10, "slow body"): four connections that each promised a 19 KB
`pushpull` or `params` body and sent one byte every 2 s held the four admission slots of the
route, because slots were taken *before* the body was read (and before it was authenticated).
The victim served 2 exchanges in 20 s instead of ~240, its peers applied nothing in robust
mode, and a joiner could not sync. A secret did not help: nothing had been authenticated yet.

So a request is served in two stages:

1. Delivery. Every body is read under a deadline, `grace_s + length / min_rate`: a body that
   does not arrive at `min_rate` bytes/s (after a grace for small bodies and a loaded box) is
   cut off with 408 and its connection closed. While it is being read it holds only the bytes
   it has delivered, counted against one `ByteBudget` shared by every route (admission per
   delivered byte): a trickle holds a trickle, and what the budget bounds is the memory of
   bodies in flight, as the old per-route admission did. A body that would overrun the
   budget is refused 503 at once.
2. Work. Only a delivered body takes a slot: the bulk routes' admission (their own concurrent
   exchanges, `max_inflight` each) and a per-remote cap (requests from one remote address
   being handled at once), so one host cannot take every slot of every route.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass

from swarmnode.node.net.body import BodyError

DEFAULT_GRACE_S = 5.0
DEFAULT_MIN_RATE = float(1 << 20)  # bytes/s: a 100 MB model may take 100 s + grace, not longer
DEFAULT_BUDGET = 1 << 30


@dataclass(frozen=True)
class IntakeLimits:
    """How long a body may take, how many bytes of bodies may be held, per-remote slots."""

    grace_s: float = DEFAULT_GRACE_S
    min_rate: float = DEFAULT_MIN_RATE
    budget_bytes: int = DEFAULT_BUDGET
    per_remote: int = 4  # admitted bulk requests from one remote address at once

    def deadline(self, length: int | None, cap: int) -> float:
        """Seconds a body of `length` bytes (unknown: up to `cap`) may take to arrive."""
        size = cap if length is None else min(length, cap)
        return self.grace_s + size / self.min_rate


class ByteBudget:
    """Bytes of request bodies delivered and not yet released, over all connections.

    Single-threaded: used from the event loop only."""

    def __init__(self, total: int) -> None:
        self.total = total
        self.used = 0

    def meter(self) -> Meter:
        return Meter(self)


class Meter:
    """One request's share of the budget: `take` each chunk as it arrives, `release` at the end."""

    def __init__(self, budget: ByteBudget) -> None:
        self.budget = budget
        self.held = 0

    def take(self, n: int) -> None:
        if self.budget.used + n > self.budget.total:
            raise BodyError("busy: too many request bytes in flight, try again later", 503)
        self.budget.used += n
        self.held += n

    def release(self) -> None:
        self.budget.used -= self.held
        self.held = 0


class RemoteSlots:
    """At most `limit` admitted requests per remote address (the TCP peer's IP)."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._held: Counter[str] = Counter()

    def enter(self, remote: str) -> bool:
        if self._held[remote] >= self.limit:
            return False
        self._held[remote] += 1
        return True

    def leave(self, remote: str) -> None:
        self._held[remote] -= 1
        if self._held[remote] <= 0:
            del self._held[remote]


async def read_on_time(
    read: Callable[[], object], length: int | None, cap: int, limits: IntakeLimits
) -> object:
    """Await `read()` (a body reader) under the delivery deadline; 408 `BodyError` past it."""
    seconds = limits.deadline(length, cap)
    try:
        return await asyncio.wait_for(read(), seconds)  # type: ignore[arg-type]
    except asyncio.TimeoutError:
        raise BodyError(
            f"body not delivered within {seconds:.1f} s (at least {limits.min_rate:.0f} bytes/s "
            f"after a {limits.grace_s:g} s grace)",
            408,
        ) from None
