"""The grid of groups (gossip/exchange/groups.py): every peer of a full grid is in exactly one
group per round, the groups agree from every member's side, and d rounds of exact group means
give every peer the swarm mean; an unfilled grid only shrinks groups."""

from __future__ import annotations

import numpy as np
import pytest
from swarmnode.gossip.exchange import grid_group
from swarmnode.gossip.exchange.groups import grid_sides

pytestmark = pytest.mark.timeout(30)


def ids(n: int) -> list[str]:
    return [f"peer-{i:03d}" for i in range(n)]


@pytest.mark.parametrize(
    ("n", "side", "sides"),
    [(1, 4, [1]), (4, 4, [4]), (5, 4, [4, 2]), (8, 4, [4, 2]), (16, 4, [4, 4]), (17, 4, [4, 4, 2]),
     (8, 2, [2, 2, 2]), (3, 2, [2, 2])],  # fmt: skip
)
def test_sides_cover_the_swarm_with_as_few_axes_as_the_group_allows(
    n: int, side: int, sides: list[int]
) -> None:
    assert grid_sides(n, side) == sides
    assert int(np.prod(sides)) >= n


@pytest.mark.parametrize("n", [2, 4, 7, 8, 16, 33])
def test_groups_agree_from_every_members_side(n: int) -> None:
    peers = ids(n)
    for r in range(4):
        for me in peers:
            group = grid_group(peers, me, r, 3)
            assert me not in group and len(group) <= 3
            for other in group:  # my partner sees me in its group, with the same others
                theirs = grid_group(peers, other, r, 3)
                assert set(theirs) | {other} == set(group) | {me}


@pytest.mark.parametrize(("n", "group"), [(4, 3), (8, 3), (16, 3), (64, 3), (8, 1), (16, 1)])
def test_exact_group_means_reach_the_swarm_mean_in_log_rounds(n: int, group: int) -> None:
    rng = np.random.default_rng(n)
    peers = ids(n)
    x = {p: rng.standard_normal(5) for p in peers}
    target = np.mean(list(x.values()), axis=0)
    rounds = len(grid_sides(n, group + 1))
    for r in range(rounds):
        new = {p: np.mean([x[q] for q in [p, *grid_group(peers, p, r, group)]], axis=0)
               for p in peers}  # fmt: skip
        x = new
    for p in peers:
        np.testing.assert_allclose(x[p], target, atol=1e-12)


def test_my_id_need_not_be_in_the_list_and_the_order_is_irrelevant() -> None:
    peers = ids(8)
    me, others = peers[5], peers[:5] + peers[6:]
    assert grid_group(others[::-1], me, 0, 3) == grid_group(peers, me, 0, 3)


def test_a_missing_member_shrinks_its_group_and_an_empty_row_says_so() -> None:
    peers = ids(5)  # a 4 x 2 grid with 3 positions empty
    assert grid_group(peers, peers[4], 0, 3) == []  # alone in its row: the caller picks at random
    assert grid_group(peers, peers[4], 1, 3) == [peers[0]]
    assert grid_group(peers, peers[1], 1, 3) == []
    assert grid_group([], "me", 0, 3) == []  # alone in the swarm
