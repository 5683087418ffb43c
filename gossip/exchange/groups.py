"""Who a round's partners are (`--group-rule`): `random` (k live peers at random, the default) or
`grid` (Moshpit SGD's grid of groups, Ryabinin et al. 2021; hivemind's averager).

The grid: the sorted ids of the live peers and mine, n of them, are laid out on a virtual grid of
d = ceil(log_s n) axes, s = k + 1 (a group is me and my k partners, the same cost as a random
round); the last axis takes what is left, ceil(n / s^(d-1)) positions, so a swarm of 8 with k = 3
is a 4 x 2 grid. A peer's position is its rank in that sorted list, written in mixed radix; in
round r its group is the peers whose position differs from its own in axis r mod d only. When
every group along an axis averages exactly, a full grid holds the exact swarm mean after d rounds
(log_s n), where random groups only shrink the spread by a constant factor a round, the same at
any n. Here a group is mixed by the usual push-pull of each member (not an exact all-reduce), so
the grid is not exact, only far faster than random groups as n grows (docs/exchange.md).

Churn: a position is a rank among the ids this peer sees live, so a dead member shifts the grid,
and two peers whose tables differ for a moment pick groups that overlap less; either way every
round is still a correct push-pull, only a slower mixer for that round. A position with no live
member leaves its group smaller; a group with nobody in it (an unfilled grid's last row) takes k
random partners instead, so a peer never sits a round out. The round number is the peer's own
count of rounds: peers that start together keep them in step, a joiner's count starts anew (its
axes are then out of phase with the others', which costs mixing speed, not correctness).
"""

from __future__ import annotations

from collections.abc import Sequence

GROUP_RULES = ("random", "grid")


def grid_sides(n: int, side: int) -> list[int]:
    """The grid's sides for n peers: as many axes of `side` as n needs, the last one holding what
    remains (mixed radix, so that 8 peers in groups of 4 fill a 4 x 2 grid exactly)."""
    if n <= 1 or side < 2:
        return [max(n, 1)]
    sides: list[int] = []
    cells = 1
    while cells * side < n:
        sides.append(side)
        cells *= side
    sides.append(-(-n // cells))  # ceil: the last axis holds the rest
    return sides


def grid_group(ids: Sequence[str], me: str, round_no: int, group: int) -> list[str]:
    """The ids in `me`'s group in round `round_no` (`me` not among them), over the peers `ids`
    (mine may be in it or not). Empty when no live peer shares that row of the grid."""
    order = sorted(set(ids) | {me})
    n = len(order)
    sides = grid_sides(n, group + 1)
    axis = round_no % len(sides)
    stride = 1
    for s in sides[:axis]:
        stride *= s
    p = order.index(me)
    base = p - ((p // stride) % sides[axis]) * stride
    rows = (base + j * stride for j in range(sides[axis]))
    return [order[q] for q in rows if q < n and q != p]
