"""The push budget (gossip/robust/push_budget.py, issue 22): per sender, pushes mixed per own
round and the distance they move this peer over a window of own rounds; distrust."""

from __future__ import annotations

import numpy as np
import pytest
from swarmnode.gossip.exchange.exchanger import ExchangeConfig
from swarmnode.gossip.link.transport import Arrival
from swarmnode.gossip.robust.push_budget import PushBudget
from swarmnode.gossip.wire import frames as wire

from tests.gossip.exchange.test_exchange import D, make_swarm

pytestmark = pytest.mark.timeout(30)


def test_each_sender_earns_one_push_a_round_and_banks_two() -> None:
    b = PushBudget()
    assert [b.allow("s", 1.0, 0.5) is not None for _ in range(4)] == [True, True, False, False]
    b.own_round()
    assert b.allow("s", 1.0, 0.5) is not None and b.allow("s", 1.0, 0.5) is None
    assert b.allow("t", 1.0, 0.5) is not None  # another sender has its own credit
    for _ in range(10):
        b.own_round()
    assert sum(b.allow("s", 1.0, 0.5) is not None for _ in range(5)) == 2  # the burst, no more
    assert b.over_rate == 6


def test_one_sender_moves_this_peer_at_most_twice_the_radius_over_eight_rounds() -> None:
    b = PushBudget()
    moved = 0.0
    for _ in range(8):
        b.own_round()
        clip = b.allow("drag", 1.0, 0.5)
        if clip is not None:
            b.spend("drag", 0.5 * clip)  # each push used all it was given
            moved += 0.5 * clip
    assert moved == pytest.approx(2.0)  # then nothing until the window moves on
    assert b.over_travel >= 1
    for _ in range(8):
        b.own_round()
    assert b.allow("drag", 1.0, 0.5) == pytest.approx(1.0)  # a fresh window


def test_a_distrusted_sender_gets_nothing_mixed_for_a_while() -> None:
    b = PushBudget(distrust_rounds=3)
    b.distrust("liar")
    assert b.distrusted("liar") and b.allow("liar", 1.0, 0.5) is None
    for _ in range(3):
        b.own_round()
    assert not b.distrusted("liar") and b.allow("liar", 1.0, 0.5) is not None
    assert b.refused_distrusted == 1
    b.distrust("liar")  # named again: twice as long
    for _ in range(5):
        b.own_round()
    assert b.distrusted("liar")
    b.own_round()
    assert not b.distrusted("liar")


@pytest.mark.parametrize("budget", [True, False])
async def test_a_member_pushing_many_times_between_two_own_rounds_is_mixed_twice(budget) -> None:
    vectors = [np.zeros(D), np.ones(D)]
    _, exs = make_swarm(vectors, ExchangeConfig(mode="average", group=1, push_budget=budget))
    await exs[0].round()  # p0's first own round (both at 0.5 now): its radius
    push = bytes(wire.encode_params(np.full(D, 0.6, np.float32), sender="p1", step=1))
    handler = exs[0].handlers()["pushpull"]
    for _ in range(10):
        await handler(Arrival(push))  # each answered like any push
    await exs[0].settle()
    mixed = 10 - exs[0].budget.over_rate - exs[0].budget.over_travel
    assert mixed == (2 if budget else 10)
    # mixed at 1/2 each: 0.5 -> 0.55 -> 0.575 (budget), or ten times toward 0.6
    expected = 0.6 - 0.1 * 0.5**mixed
    np.testing.assert_allclose(exs[0].store.x, expected, rtol=1e-5)


def test_a_sender_whose_pushes_keep_needing_the_consensus_cut_is_distrusted() -> None:
    """CUT_LIMIT cut pushes among a sender's last CUT_WINDOW: distrusted (and doubled on the
    next time, as for the collapse guard); an honest sender with a cut now and then is not."""
    b = PushBudget(distrust_rounds=4)
    for cut in [True, False, False, False, False, False, True, False, False, False]:
        b.pushed("honest", cut)
    assert not b.distrusted("honest")
    for cut in [True, False, True, True]:
        b.pushed("liar", cut)
    assert b.distrusted("liar") and b.distrusted_for_cuts == 1
    for _ in range(4):
        b.own_round()
    assert not b.distrusted("liar")
    for _ in range(3):
        b.pushed("liar", True)
    assert b.distrusted("liar")
    for _ in range(7):
        b.own_round()
    assert b.distrusted("liar")  # the second time: 8 rounds
