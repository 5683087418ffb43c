"""Membership over the in-memory network.

Most tests drive time by hand: a fake clock judges liveness and each round every peer runs
`gossip_round()` once, so detection times are exact and nothing depends on the machine's speed.
A few tests run the real loops (`start()`) with short intervals and poll conditions against
deadlines, to check the task lifecycle and the behaviour under real scheduling.
"""

from __future__ import annotations

import dataclasses
import time

import pytest
from swarmnode.gossip.errors import MembershipError
from swarmnode.gossip.membership.failure import (
    ALIVE,
    DEAD,
    LEFT,
    SUSPECT,
    detection_deadline,
    spread_rounds,
)
from swarmnode.gossip.membership.table import Change

from tests.gossip.membership.membership_harness import CFG, FAST, FakeClock, Swarm, close_all
from tests.waiting import eventually

pytestmark = pytest.mark.timeout(60)


# --- the swarm on a virtual clock ------------------------------------------------------


async def test_peers_joining_through_one_seed_converge_in_log_n_rounds() -> None:
    swarm = Swarm()
    ms = [swarm.add(i) for i in range(12)]
    for i, m in enumerate(ms):
        m.set_meta(step=i, device="cpu")
    for m in ms[1:]:
        await m.join([ms[0].addr], timeout=5.0)
    assert len(ms[0].live_peers()) == 11  # the seed adds each joiner at once
    rounds = await swarm.rounds_until(swarm.converged, limit=spread_rounds(12, CFG.fanout) + 2)
    assert rounds <= spread_rounds(12, CFG.fanout) + 2
    view = ms[3].get("p7")
    assert (view.state, view.meta["step"], view.meta["device"]) == (ALIVE, 7, "cpu")


# Every bound it checks is in rounds of the virtual clock; the wall-clock limit only catches a
# hang. Its work is fixed and all CPU: ~12 rounds of 600 digests of 200 entries, 2.8 million
# entries parsed (entries.parse_entry: 43% of its time). 33 s alone (load 24, mostly paced
# peers), 43 s in a quiet full run; under the old 120 s limit it failed in loaded runs, where it
# got under a quarter of a core. 300 s: ten times its CPU.
@pytest.mark.timeout(300)
async def test_two_hundred_peers_in_one_process_converge_and_agree_on_a_death() -> None:
    # The in-memory network at the size it exists for: hundreds of real Membership objects,
    # real digests over the transport interface, one virtual clock.
    n = 200
    # all on 10.0.0.0/24 (the harness's addresses): a subnet of 200 peers, above the default
    # per-prefix cap of 128 (gossip/membership/caps.py), so this swarm raises it
    swarm = Swarm(dataclasses.replace(CFG, max_members_per_prefix=n))
    ms = await swarm.join_all(n)
    limit = spread_rounds(n, CFG.fanout) + 4
    assert await swarm.rounds_until(swarm.converged, limit=limit) <= limit
    victim = swarm.crash("p123")
    crashed_at = swarm.fake.t
    deadline = detection_deadline(CFG.dead_after, CFG.gossip_interval, n, CFG.fanout)
    await swarm.rounds_until(
        lambda: swarm.state_everywhere("p123") == {DEAD},
        limit=int(deadline / CFG.gossip_interval) + 2,
    )
    assert CFG.dead_after <= swarm.fake.t - crashed_at <= deadline
    assert all(len(m.live_peers()) == n - 2 for m in ms if m is not victim)  # no false deaths
    await close_all([m for m in ms if m is not victim])


async def test_progress_meta_spreads_with_the_heartbeat() -> None:
    swarm = Swarm()
    ms = await swarm.join_all(6)
    await swarm.rounds_until(swarm.converged, limit=6)
    ms[2].set_meta(step=1234, loss=0.5, acc=0.875)
    await swarm.rounds_until(
        lambda: all(m.get("p2").meta.get("step") == 1234 for m in ms if m is not ms[2]), limit=6
    )
    assert ms[5].get("p2").as_status()["acc"] == 0.875


async def test_a_crashed_peer_is_dead_everywhere_within_the_detection_deadline() -> None:
    swarm = Swarm()
    ms = await swarm.join_all(12)
    await swarm.rounds_until(swarm.converged, limit=8)
    changes: list[tuple[str, Change]] = []
    for m in ms:
        m.on_change(lambda c, who=m.self_id: changes.append((who, c)))
    swarm.crash("p7")
    crashed_at = swarm.fake.t
    await swarm.rounds_until(lambda: swarm.state_everywhere("p7") == {DEAD}, limit=40)
    took = swarm.fake.t - crashed_at
    assert (
        CFG.dead_after
        <= took
        <= detection_deadline(CFG.dead_after, CFG.gossip_interval, 12, CFG.fanout)
    )
    # nobody else was ever doubted, and everyone saw p7 go suspect before dead
    assert {c.peer_id for _, c in changes} == {"p7"}
    assert {(c.old, c.new) for _, c in changes} == {(ALIVE, SUSPECT), (SUSPECT, DEAD)}


async def test_a_leaving_peer_is_marked_left_by_all_at_once_and_stays_left() -> None:
    swarm = Swarm()
    ms = await swarm.join_all(10)
    await swarm.rounds_until(swarm.converged, limit=8)
    acks = await ms[3].leave()
    assert acks == 9
    assert swarm.state_everywhere("p3") == {LEFT}  # no timeout involved
    assert await ms[3].leave() == 0  # idempotent
    for _ in range(10):
        await swarm.round()
    assert swarm.state_everywhere("p3") == {LEFT}
    assert all("p3" not in {p.peer_id for p in m.live_peers()} for m in ms)


@pytest.mark.parametrize("new_incarnation", [1, 50])
async def test_a_restarted_peer_is_taken_back_not_shadowed_by_its_tombstone(
    new_incarnation: int,
) -> None:
    swarm = Swarm()
    await swarm.join_all(8)
    await swarm.rounds_until(swarm.converged, limit=8)
    swarm.crash("p4")
    await swarm.rounds_until(lambda: swarm.state_everywhere("p4") == {DEAD}, limit=40)
    # same id, new address; incarnation 1 is what it had: the tombstone's own incarnation
    reborn = swarm.add(4, incarnation=new_incarnation, addr="10.0.0.44:7070")
    await reborn.join(["10.0.0.0:7070"], timeout=5.0)
    assert reborn.incarnation == max(new_incarnation, 2)  # refuted its tombstone if it had to
    assert swarm.peers["p0"].get("p4").state == ALIVE  # the seed took it back at once
    await swarm.rounds_until(lambda: swarm.state_everywhere("p4") == {ALIVE}, limit=8)
    assert {m.get("p4").addr for pid, m in swarm.peers.items() if pid != "p4"} == {"10.0.0.44:7070"}
    await swarm.rounds_until(swarm.converged, limit=8)


async def test_a_false_death_is_refuted_by_the_living_peer() -> None:
    swarm = Swarm()
    ms = await swarm.join_all(4)
    await swarm.rounds_until(swarm.converged, limit=6)
    # p0 alone hears nothing from p2 for long enough (a partition of one link, say)
    entry = ms[0].table._entries["p2"]
    entry.last_advance -= 10.0
    ms[0].table.sweep(swarm.fake.t)
    assert ms[0].get("p2").state == DEAD
    assert ms[1].get("p2").state == ALIVE  # p0's opinion does not spread as a death
    await swarm.rounds_until(lambda: swarm.state_everywhere("p2") == {ALIVE}, limit=6)
    assert ms[2].incarnation == 2
    assert ms[2].self_member.state == ALIVE


# --- real loops, real time ----------------------------------------------------------------


async def test_running_swarm_detects_a_crash_and_a_freeze_and_takes_the_frozen_back() -> None:
    swarm = Swarm(FAST, clock=time.monotonic)
    ms = await swarm.join_all(8)
    try:
        for m in ms:
            await m.start()
        await eventually(swarm.converged, 15.0, "convergence")

        crashed = swarm.crash("p5")
        await crashed.close()
        t0 = time.monotonic()
        await eventually(lambda: swarm.state_everywhere("p5") == {DEAD}, 15.0, "p5 dead")
        took = time.monotonic() - t0
        assert took >= FAST.suspect_after  # never declared before it could have been silent

        swarm.net.freeze(ms[6].addr)  # SIGSTOP-like: hangs, answers nothing
        await eventually(lambda: swarm.state_everywhere("p6") == {DEAD}, 15.0, "p6 dead")
        swarm.net.thaw(ms[6].addr)  # SIGCONT: it learns it was declared dead and refutes
        await eventually(lambda: swarm.state_everywhere("p6") == {ALIVE}, 15.0, "p6 back")
        assert ms[6].incarnation > 1
    finally:
        await close_all(ms)
    assert all(m._loop_task is None and not m._inflight for m in ms)


async def test_start_close_lifecycle_owns_its_tasks() -> None:
    swarm = Swarm(FAST, clock=time.monotonic)
    a, b = await swarm.join_all(2)
    await a.start()
    await a.start()  # idempotent
    await b.start()
    try:
        hb = b.get("p0").heartbeat
        await eventually(lambda: b.get("p0").heartbeat > hb + 2, 10.0, "heartbeats")
        await a.leave()
        assert b.get("p0").state == LEFT
        assert a._loop_task is None  # leaving stops the loop
    finally:
        await close_all([a, b])
        await close_all([a, b])  # idempotent
    with pytest.raises(MembershipError, match="closed"):
        await a.start()


async def test_our_own_stall_does_not_kill_the_others() -> None:
    clock = FakeClock()
    swarm = Swarm(FAST, clock=clock)
    a, b = await swarm.join_all(2)
    bystander = swarm.add(2)  # same view of b, but no loop running: no stall guard
    await bystander.join([b.addr], timeout=5.0)
    await a.start()
    try:
        await eventually(lambda: a._last_tick is not None, 5.0, "first tick")
        clock.advance(30.0)  # a's loop was frozen for 30 s: it heard nothing, b did nothing wrong
        assert a.get("p1").state == ALIVE
        assert bystander.get("p1").state == DEAD
    finally:
        await close_all([a, b, bystander])


def test_a_log_line_names_a_named_member_by_name_and_id_prefix() -> None:
    from types import SimpleNamespace

    from swarmnode.gossip.membership import label_of

    pid = "abcdefgh12345678"
    assert label_of(SimpleNamespace(meta={"name": "b"}), pid) == "b (abcdefgh)"
    assert label_of(SimpleNamespace(meta={}), pid) == pid  # no name: the id, whole
    assert label_of(None, pid) == pid  # not (yet) in the table
