"""The member table's bounds on a fake clock: the cap and its tombstone eviction, and the
counter bounds (incarnation and heartbeat jumps, 2^53) - unsigned entries, the rules alone."""

from __future__ import annotations

from typing import Any

import pytest
from swarmnode.gossip.errors import CodecError
from swarmnode.gossip.membership.entries import MAX_COUNTER, Gossiped, parse_entry
from swarmnode.gossip.membership.failure import ALIVE, DEAD, LEFT
from swarmnode.gossip.membership.table import (
    MAX_HEARTBEAT_JUMP,
    MAX_INCARNATION_JUMP,
    MemberTable,
    Timing,
)

pytestmark = pytest.mark.timeout(30)

TIMING = Timing(
    suspect_after=1.5, dead_after=2.5, tombstone_ttl=60.0, gossip_interval=0.5, fanout=3
)


def g(peer_id: str, inc: int = 1, hb: int = 1, state: str = ALIVE, age: float = 0.0) -> Gossiped:
    return Gossiped(peer_id, f"{peer_id}.host:1", inc, hb, state, age, {})


def capped(n: int) -> MemberTable:
    return MemberTable("me", "me.host:1", 5, TIMING, max_members=n)


def ids(t: MemberTable, now: float) -> set[str]:
    return {m.peer_id for m in t.members(now)}


def test_a_full_table_refuses_newcomers_and_keeps_the_members_it_knows() -> None:
    t = capped(3)
    t.merge([g("a"), g("b"), g("c")], now=0.0)
    t.merge([g("d"), g("e")], now=0.1)
    assert ids(t, 0.1) == {"a", "b", "c"} and len(t) == 3 and t.refused == 2
    t.merge([g("a", hb=2), g("d")], now=0.2)  # a known member still advances
    assert t.get("a", 0.2).heartbeat == 2 and t.refused == 3


def test_a_newcomer_replaces_the_oldest_tombstone_only() -> None:
    t = capped(3)
    t.merge([g("a"), g("b"), g("c")], now=0.0)
    t.merge([g("b", hb=2)], now=1.0)  # b heard later than a and c
    t.merge([g("c", hb=2)], now=2.0)
    t.sweep(3.0)  # a (silent since 0.0) is dead; b and c are not yet
    assert t.get("a", 3.0).state == DEAD
    t.merge([g("d")], now=3.0)
    assert ids(t, 3.0) == {"b", "c", "d"} and t.refused == 0
    t.merge([g("e")], now=3.1)  # no tombstone left: refused, nobody live is pushed out
    assert ids(t, 3.1) == {"b", "c", "d"} and t.refused == 1


def test_the_oldest_of_several_tombstones_goes_first() -> None:
    t = capped(3)
    t.merge([g("a", state=LEFT, age=5.0), g("b", state=LEFT, age=20.0), g("c")], now=100.0)
    t.merge([g("d")], now=100.0)
    assert {m.peer_id for m in t.members(100.0)} == {"a", "c", "d"}


def test_the_cap_holds_under_a_flood_of_ids() -> None:
    t = capped(64)
    for i in range(50):
        t.merge([g(f"f{i}-{j}") for j in range(100)], now=float(i))
        t.sweep(float(i))
    assert len(t) <= 64


@pytest.mark.parametrize("jump", [MAX_INCARNATION_JUMP + 1, 2 * MAX_INCARNATION_JUMP])
def test_an_incarnation_far_ahead_is_refused(jump: int) -> None:
    t = capped(8)
    t.merge([g("a", inc=1)], now=0.0)
    t.merge([g("a", inc=1 + jump)], now=0.1)
    assert t.get("a", 0.1).incarnation == 1 and t.refused == 1
    t.merge([g("a", inc=1 + MAX_INCARNATION_JUMP)], now=0.2)  # at the bound: a restart
    assert t.get("a", 0.2).incarnation == 1 + MAX_INCARNATION_JUMP


def test_a_heartbeat_far_ahead_is_refused_and_does_not_keep_a_member_alive() -> None:
    t = capped(8)
    t.merge([g("a", hb=1)], now=0.0)
    t.merge([g("a", hb=2 + MAX_HEARTBEAT_JUMP)], now=1.0)
    assert t.get("a", 1.0).heartbeat == 1 and t.refused == 1
    t.sweep(3.0)
    assert t.get("a", 3.0).state == DEAD


@pytest.mark.parametrize("field", ["incarnation", "heartbeat"])
def test_counters_beyond_2_53_are_refused_at_parse(field: str) -> None:
    raw: list[Any] = ["a", "a.host:1", 1, 1, ALIVE, 0.0, {}]
    raw[2 if field == "incarnation" else 3] = MAX_COUNTER + 1
    with pytest.raises(CodecError, match=rf"{field} \d+ is beyond 2\^53"):
        parse_entry(raw)
    raw[2 if field == "incarnation" else 3] = MAX_COUNTER
    assert parse_entry(raw).peer_id == "a"


def test_a_doubt_at_the_counter_bound_is_not_refuted_past_it() -> None:
    t = MemberTable("me", "me.host:1", 5, TIMING)
    t.merge([g("me", inc=MAX_COUNTER, state=DEAD)], now=0.0)
    assert t.incarnation == 5 and t.refused == 1  # refusing beats an unencodable incarnation
    t.merge([g("me", inc=MAX_COUNTER - 1, state=DEAD)], now=0.0)
    assert t.incarnation == MAX_COUNTER
