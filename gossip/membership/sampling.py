"""Uniform peer sampling over the membership view, for gossip and for the parameter exchange.

Uniform choice over live peers is what both protocols' analyses assume: epidemic spread in
O(log n) rounds for gossip, and an unbiased mixing matrix for gossip averaging.

Uniform over the members that can be dialled: a member whose own signed meta says
`reach = outbound` (nobody can dial it: behind a NAT) is never a dial target. It still takes
part by dialling out (its pushes carry its record and its model); dialling it would only wait
for a deadline. A member that lies to be left alone gives up only the exchanges others would
have started with it.
"""

from __future__ import annotations

import random
from collections.abc import Collection, Sequence
from typing import Any, Protocol, TypeVar

from swarmnode.gossip.membership.failure import ALIVE


class _HasIdAndState(Protocol):
    @property
    def peer_id(self) -> str: ...

    @property
    def state(self) -> str: ...


M = TypeVar("M", bound=_HasIdAndState)

REACH = "reach"  # the meta key: how this member can be reached
OUTBOUND = "outbound"  # ...only by its own dials out: never dial it


H = TypeVar("H")


def outbound_only(member: Any) -> bool:
    """Whether the member says, in its own signed meta, that nobody can dial it (a view
    without meta, as some callers' stand-ins are, says nothing)."""
    meta = getattr(member, "meta", None)
    return meta is not None and meta.get(REACH) == OUTBOUND


def dialable(members: Sequence[H]) -> list[H]:
    """The members that may be dialled: all but the outbound-only ones."""
    return [m for m in members if not outbound_only(m)]


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
