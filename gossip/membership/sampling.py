"""Uniform peer sampling over the membership view, for gossip and for the parameter exchange.

Uniform choice over live peers is what both protocols' analyses assume: epidemic spread in
O(log n) rounds for gossip, and an unbiased mixing matrix for gossip averaging.
"""

from __future__ import annotations

import random
from collections.abc import Collection, Sequence
from typing import Protocol, TypeVar

from swarmnode.gossip.membership.failure import ALIVE


class _HasIdAndState(Protocol):
    @property
    def peer_id(self) -> str: ...

    @property
    def state(self) -> str: ...


M = TypeVar("M", bound=_HasIdAndState)


def sample_peers(
    members: Sequence[M],
    k: int,
    rng: random.Random,
    exclude: Collection[str] = (),
    states: Collection[str] = (ALIVE,),
) -> list[M]:
    """Up to `k` distinct members, uniformly at random, among those whose state is in
    `states` (default: alive only) and whose peer id is not in `exclude`."""
    if k <= 0:
        return []
    pool = [m for m in members if m.state in states and m.peer_id not in exclude]
    if len(pool) <= k:
        rng.shuffle(pool)  # callers may take the first few: keep the order random too
        return pool
    return rng.sample(pool, k)
