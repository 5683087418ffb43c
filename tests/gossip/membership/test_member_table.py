"""Merge rules, tombstones, refutation, digests and entry validation of the member table,
on a fake clock (every method takes `now`); and the peer sampler over its views."""

from __future__ import annotations

import random
from collections import Counter
from typing import Any

import msgpack
import pytest
from swarmnode.gossip.errors import CodecError, MembershipError
from swarmnode.gossip.membership.entries import (
    Gossiped,
    meta_problem,
    parse_entries,
    parse_entry,
)
from swarmnode.gossip.membership.failure import ALIVE, DEAD, LEFT, SUSPECT
from swarmnode.gossip.membership.records import to_wire
from swarmnode.gossip.membership.sampling import sample_peers
from swarmnode.gossip.membership.table import Member, MemberTable, Timing

TIMING = Timing(
    suspect_after=1.5, dead_after=2.5, tombstone_ttl=60.0, gossip_interval=0.5, fanout=3
)


def g(
    peer_id: str = "b",
    inc: int = 1,
    hb: int = 1,
    state: str = ALIVE,
    age: float = 0.0,
    meta: dict[str, Any] | None = None,
    addr: str | None = None,
) -> Gossiped:
    return Gossiped(peer_id, addr or f"{peer_id}.host:7070", inc, hb, state, age, meta or {})


def table(incarnation: int = 5) -> MemberTable:
    return MemberTable("me", "me.host:7070", incarnation, TIMING)


def state(t: MemberTable, peer_id: str, now: float) -> str | None:
    m = t.get(peer_id, now)
    return None if m is None else m.state


# --- liveness over time ------------------------------------------------------------------


def test_a_silent_member_goes_suspect_then_dead_on_local_time() -> None:
    t = table()
    t.merge([g(hb=1)], now=100.0)
    assert [state(t, "b", now) for now in (100.0, 101.4, 101.5, 102.4, 102.5)] == [
        ALIVE,
        ALIVE,
        SUSPECT,
        SUSPECT,
        DEAD,
    ]


def test_a_heartbeat_advance_restarts_the_silence_timer() -> None:
    t = table()
    t.merge([g(hb=1)], now=100.0)
    t.merge([g(hb=2)], now=102.0)  # suspect by now, then heard again
    assert state(t, "b", 102.0) == ALIVE
    # the silence counts from 102 (against b's own thresholds: its late beat stretched them)
    suspect_after, _ = t.limits_of("b")
    assert state(t, "b", 102.0 + suspect_after - 0.01) == ALIVE
    assert state(t, "b", 102.0 + suspect_after) == SUSPECT
    assert t.get("b", 104.0).last_heard_s == pytest.approx(2.0)


def test_a_repeated_or_older_heartbeat_does_not_count_as_news() -> None:
    t = table()
    t.merge([g(hb=7)], now=100.0)
    t.merge([g(hb=7), g(hb=3)], now=102.0)
    assert state(t, "b", 102.6) == DEAD
    assert t.get("b", 102.6).heartbeat == 7


# --- merge rules -------------------------------------------------------------------------


def test_higher_incarnation_wins_and_lower_is_stale() -> None:
    t = table()
    t.merge([g(inc=2, hb=50, addr="old:1")], now=0.0)
    t.merge([g(inc=3, hb=1, addr="new:2")], now=1.0)
    m = t.get("b", 1.0)
    assert (m.incarnation, m.heartbeat, m.addr) == (3, 1, "new:2")
    t.merge([g(inc=2, hb=99, addr="old:1")], now=2.0)  # gossip about the previous life
    m = t.get("b", 2.0)
    assert (m.incarnation, m.heartbeat, m.addr) == (3, 1, "new:2")


def test_stale_gossip_cannot_resurrect_a_dead_member() -> None:
    t = table()
    t.merge([g(inc=1, hb=10)], now=0.0)
    t.sweep(3.0)  # silent for 3 s: dead
    assert state(t, "b", 3.0) == DEAD
    t.merge([g(inc=1, hb=11)], now=4.0)  # a beat that was still floating around
    assert state(t, "b", 4.0) == DEAD
    assert t.get("b", 4.0).heartbeat == 10


def test_a_late_beat_cannot_revive_a_member_dead_by_our_timer_even_before_a_sweep() -> None:
    t = table()
    t.merge([g(hb=1)], now=0.0)
    t.merge([g(hb=2)], now=2.6)  # no sweep ran in between
    assert state(t, "b", 2.6) == DEAD
    assert t.sweep(2.6)[0].new == DEAD


def test_a_restarted_peer_with_a_higher_incarnation_overrides_its_tombstone() -> None:
    t = table()
    t.merge([g(inc=1, hb=10)], now=0.0)
    t.sweep(3.0)
    t.merge([g(inc=2, hb=0, addr="b.host:7171")], now=4.0)
    m = t.get("b", 4.0)
    assert (m.state, m.incarnation, m.addr) == (ALIVE, 2, "b.host:7171")
    assert state(t, "b", 5.0) == ALIVE  # its silence timer started afresh


def test_remote_dead_does_not_kill_a_member_we_still_hear() -> None:
    t = table()
    t.merge([g(inc=1, hb=10)], now=0.0)
    t.merge([g(inc=1, hb=10, state=DEAD, age=0.5)], now=1.0)  # one starved peer's opinion
    assert state(t, "b", 1.0) == ALIVE


def test_remote_dead_of_a_newer_incarnation_is_adopted() -> None:
    t = table()
    t.merge([g(inc=1, hb=10)], now=0.0)
    t.merge([g(inc=2, hb=3, state=DEAD, age=1.0)], now=1.0)
    m = t.get("b", 1.0)
    assert (m.state, m.incarnation) == (DEAD, 2)


def test_left_is_final_for_its_incarnation() -> None:
    t = table()
    t.merge([g(inc=1, hb=10)], now=0.0)
    t.merge([g(inc=1, hb=10, state=LEFT)], now=1.0)
    assert state(t, "b", 1.0) == LEFT  # at once, not after a timeout
    t.merge([g(inc=1, hb=12)], now=1.5)  # beats it sent before leaving
    assert state(t, "b", 1.5) == LEFT


def test_left_upgrades_a_dead_tombstone() -> None:
    t = table()
    t.merge([g(inc=1, hb=10)], now=0.0)
    t.sweep(3.0)
    t.merge([g(inc=1, hb=10, state=LEFT, age=0.1)], now=4.0)
    assert state(t, "b", 4.0) == LEFT


def test_tombstones_of_unknown_peers_are_learnt_with_their_age_and_expire_on_time() -> None:
    t = table()
    t.merge([g("x", state=DEAD, age=50.0), g("y", state=LEFT, age=60.0)], now=100.0)
    assert state(t, "x", 100.0) == DEAD
    assert t.get("y", 100.0) is None  # already expired at its source: not learnt
    t.merge([g("x", inc=1, hb=99)], now=105.0)  # stale alive gossip: no resurrection
    assert state(t, "x", 105.0) == DEAD
    assert t.get("x", 109.9) is not None
    assert t.get("x", 110.0) is None  # 50 s old + 10 s here = the 60 s TTL
    t.sweep(110.0)
    assert len(t) == 0


def test_digest_carries_tombstone_age_so_it_does_not_circulate_forever() -> None:
    a, b = table(), MemberTable("other", "other.host:1", 1, TIMING)
    a.merge([g("x", hb=1)], now=0.0)
    a.sweep(10.0)  # dead since 2.5
    b.merge(a.digest(now=40.0), now=40.0)  # b learns a tombstone 37.5 s old
    entry = next(e for e in b.digest(now=40.0) if e.peer_id == "x")
    assert (entry.state, entry.age) == (DEAD, pytest.approx(37.5))
    assert b.get("x", 62.4) is not None
    assert b.get("x", 62.5) is None  # expires when it expires at a


# --- our own entry --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("claim", "expected_incarnation"),
    [
        (g("me", inc=5, state=DEAD), 6),
        (g("me", inc=5, state=SUSPECT), 6),
        (g("me", inc=5, state=LEFT), 6),
        (g("me", inc=9, state=ALIVE), 10),  # a newer life of us we did not know about
        (g("me", inc=5, state=ALIVE), 5),  # others agree with us: nothing to do
        (g("me", inc=3, state=DEAD), 5),  # about an older life: stale
    ],
)
def test_claims_about_ourselves_are_refuted_never_adopted(
    claim: Gossiped, expected_incarnation: int
) -> None:
    t = table(incarnation=5)
    t.merge([claim], now=0.0)
    assert t.incarnation == expected_incarnation
    assert t.self_entry().state == ALIVE
    assert t.get("me", 0.0) is None
    assert all(m.peer_id != "me" for m in t.members(0.0))


def test_a_leaving_peer_does_not_refute() -> None:
    t = table(incarnation=5)
    t.leaving = True
    t.merge([g("me", inc=5, state=DEAD)], now=0.0)
    assert t.incarnation == 5
    assert t.self_entry().state == LEFT


# --- sweep, thresholds, credit --------------------------------------------------------


def test_sweep_reports_each_transition_once() -> None:
    t = table()
    t.merge([g(hb=1)], now=0.0)
    assert [(c.old, c.new) for c in t.sweep(0.0)] == [(None, ALIVE)]
    assert t.sweep(0.5) == []
    assert [(c.old, c.new) for c in t.sweep(1.6)] == [(ALIVE, SUSPECT)]
    assert [(c.old, c.new) for c in t.sweep(2.6)] == [(SUSPECT, DEAD)]
    t.merge([g(inc=2, hb=0)], now=3.0)
    changes = t.sweep(3.0)
    assert [(c.old, c.new, c.incarnation) for c in changes] == [(DEAD, ALIVE, 2)]


def test_thresholds_grow_with_the_number_of_live_members() -> None:
    t = table()
    assert (t.suspect_after, t.dead_after) == (1.5, 2.5)
    t.merge([g(f"p{i}") for i in range(15)], now=0.0)
    t.sweep(0.0)  # 16 live peers with us: one more interval of allowance per extra hop
    assert (t.suspect_after, t.dead_after) == pytest.approx((2.5, 3.5))
    assert state(t, "p0", 3.0) == SUSPECT  # would be dead with the small-swarm threshold


def test_credit_extends_silence_timers_after_our_own_stall() -> None:
    t = table()
    t.merge([g(hb=1)], now=0.0)
    t.credit(5.0)
    assert state(t, "b", 5.0) == ALIVE
    assert state(t, "b", 7.5) == DEAD


# --- digests -----------------------------------------------------------------------------


def test_digest_puts_our_entry_first_and_reflects_new_beats() -> None:
    t = table()
    t.set_meta({"step": 3})
    t.bump()
    t.merge([g(hb=1, meta={"step": 1})], now=0.0)
    first = t.digest(now=0.0)
    assert first[0] == ("me", "me.host:7070", 5, 1, ALIVE, 0.0, {"step": 3}, None)
    assert first[1] == g(hb=1, meta={"step": 1})
    t.merge([g(hb=2, meta={"step": 2})], now=0.5)
    assert t.digest(now=0.5)[1] == g(hb=2, meta={"step": 2})


def test_digest_is_capped_but_always_carries_our_heartbeat() -> None:
    t = table()
    t.merge([g(f"p{i}") for i in range(20)], now=0.0)
    out = t.digest(now=0.0, limit=5, rng=random.Random(1))
    assert len(out) == 5
    assert out[0].peer_id == "me"
    assert len({e.peer_id for e in out}) == 5


def test_a_digest_survives_msgpack_and_validation_unchanged() -> None:
    t = table()
    t.set_meta({"step": 7, "loss": 0.25, "acc": None, "device": "cpu"})
    t.merge([g("x", hb=4), g("y", state=LEFT, age=3.0)], now=10.0)
    digest = t.digest(now=11.0)
    wire = msgpack.unpackb(msgpack.packb([to_wire(e) for e in digest]), raw=False)
    good, dropped = parse_entries(wire, limit=100)
    assert dropped == []
    assert good == digest


# --- validation ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "fragment"),
    [
        ("not a list", "array of 7"),
        (["b", "h:1", 1, 1, ALIVE, 0.0], "array of 7"),
        (["", "h:1", 1, 1, ALIVE, 0.0, {}], "bad member id"),
        ([7, "h:1", 1, 1, ALIVE, 0.0, {}], "bad member id"),
        (["b", "no-port", 1, 1, ALIVE, 0.0, {}], "bad address"),
        (["b", "h:abc", 1, 1, ALIVE, 0.0, {}], "bad address"),
        (["b", "h:1", -1, 1, ALIVE, 0.0, {}], "bad incarnation"),
        (["b", "h:1", 1, True, ALIVE, 0.0, {}], "bad heartbeat"),
        (["b", "h:1", 1, 1.5, ALIVE, 0.0, {}], "bad heartbeat"),
        (["b", "h:1", 1, 1, "zombie", 0.0, {}], "unknown state"),
        (["b", "h:1", 1, 1, DEAD, -1.0, {}], "bad tombstone age"),
        (["b", "h:1", 1, 1, DEAD, float("inf"), {}], "bad tombstone age"),
        (["b", "h:1", 1, 1, ALIVE, 0.0, []], "meta must be a map"),
        (["b", "h:1", 1, 1, ALIVE, 0.0, {"x": [1]}], "has type list"),
        # what the exact-type fast path leaves to the full check, which must still refuse it
        (["b", "h:1", False, 1, ALIVE, 0.0, {}], "bad incarnation"),
        (["b", "h:1", 1, 2**64, ALIVE, 0.0, {}], "beyond 2"),
        (["b", "h:1", 1, 1, DEAD, float("nan"), {}], "bad tombstone age"),
        (["b", "h:1", 1, 1, DEAD, True, {}], "bad tombstone age"),
        (["b", "h:1", 1, 1, DEAD, "0", {}], "bad tombstone age"),
        (["b", b"h:1", 1, 1, ALIVE, 0.0, {}], "bad address"),
        (["b", "h:1", 1, 1, [ALIVE], 0.0, {}], "unknown state"),
        (["b", "h:1", 1, 1, ALIVE, 0.0, {"loss": float("-inf")}], "not finite"),
        (["b", "h:1", 1, 1, ALIVE, 0.0, {"x": b"bytes"}], "has type bytes"),
    ],
)
def test_parse_entry_rejects_malformed_entries(raw: object, fragment: str) -> None:
    with pytest.raises(CodecError, match=fragment):
        parse_entry(raw)


class _Str(str):
    pass


class _Int(int):
    pass


def test_parse_entry_takes_good_fields_of_other_shapes_through_the_full_check() -> None:
    # a tuple entry, str and int subclasses, an int age: not msgpack's shapes, but not wrong
    raw = (_Str("b"), _Str("h:1"), _Int(3), _Int(4), ALIVE, 2, {"n": _Int(1), "d": _Str("cpu")})
    e = parse_entry(raw)
    assert (e.peer_id, e.addr, e.incarnation, e.heartbeat, e.age) == ("b", "h:1", 3, 4, 2.0)
    assert type(e.age) is float and dict(e.meta) == {"n": 1, "d": "cpu"}


def test_parse_entries_drops_bad_entries_and_keeps_the_rest() -> None:
    good, dropped = parse_entries([to_wire(g("a")), ["junk"], to_wire(g("c"))], limit=10)
    assert [e.peer_id for e in good] == ["a", "c"]
    assert len(dropped) == 1 and "array of 7" in dropped[0]


@pytest.mark.parametrize(("raw", "fragment"), [({"a": 1}, "must be an array"), ([[]] * 11, "cap")])
def test_parse_entries_rejects_a_malformed_digest_as_a_whole(raw: object, fragment: str) -> None:
    with pytest.raises(CodecError, match=fragment):
        parse_entries(raw, limit=10)


@pytest.mark.parametrize(
    ("meta", "ok"),
    [
        ({"step": 1, "loss": 0.5, "acc": None, "device": "cuda:0", "byz": False}, True),
        ({}, True),
        ({"loss": float("nan")}, False),
        ({"k" * 33: 1}, False),
        ({"device": "x" * 129}, False),
        ({f"k{i}": i for i in range(13)}, False),
        ({"nested": {"a": 1}}, False),
        ({1: "int key"}, False),
    ],
)
def test_meta_problem_table(meta: dict, ok: bool) -> None:
    assert (meta_problem(meta) is None) is ok


def test_set_meta_rejects_bad_values_and_keeps_the_old_meta() -> None:
    t = table()
    t.set_meta({"step": 1})
    with pytest.raises(MembershipError, match="not finite"):
        t.set_meta({"step": 2, "loss": float("inf")})
    assert t.self_entry().meta == {"step": 1}


def test_member_as_status_has_the_status_route_fields() -> None:
    meta = {"step": 5, "loss": 0.5, "acc": 0.9, "name": "bee"}
    m = Member("b", "h:1", ALIVE, 3, 9, 0.12345, meta)
    assert m.as_status() == {
        "peer_id": "b",
        "name": "bee",
        "addr": "h:1",
        "state": ALIVE,
        "incarnation": 3,
        "heartbeat": 9,
        "last_heard_s": 0.123,
        "step": 5,
        "loss": 0.5,
        "acc": 0.9,
        "device": None,
    }


# --- sampling ------------------------------------------------------------------------


def _members(states: list[str]) -> list[Member]:
    return [Member(f"p{i}", f"h:{i}", s, 1, 1, 0.0, {}) for i, s in enumerate(states)]


def test_sample_peers_takes_only_live_peers_not_excluded() -> None:
    ms = _members([ALIVE, SUSPECT, DEAD, LEFT, ALIVE, ALIVE])
    picked = sample_peers(ms, 10, random.Random(0), exclude={"p5"})
    assert sorted(m.peer_id for m in picked) == ["p0", "p4"]
    with_suspects = sample_peers(ms, 10, random.Random(0), states=(ALIVE, SUSPECT))
    assert sorted(m.peer_id for m in with_suspects) == ["p0", "p1", "p4", "p5"]
    assert sample_peers(ms, 0, random.Random(0)) == []


def test_sample_peers_is_uniform_and_distinct() -> None:
    ms = _members([ALIVE] * 10)
    rng = random.Random(42)
    counts: Counter[str] = Counter()
    for _ in range(3000):
        picked = sample_peers(ms, 3, rng)
        assert len({m.peer_id for m in picked}) == 3
        counts.update(m.peer_id for m in picked)
    # each peer is picked 900 times in expectation; +-15% is > 5 standard deviations
    assert all(765 < c < 1035 for c in counts.values()), counts
