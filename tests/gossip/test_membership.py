"""Membership over the in-memory network.

Most tests drive time by hand: a fake clock judges liveness and each round every peer runs
`gossip_round()` once, so detection times are exact and nothing depends on the machine's speed.
A few tests run the real loops (`start()`) with short intervals and poll conditions against
deadlines, to check the task lifecycle and the behaviour under real scheduling.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Callable

import pytest
from swarmnode.gossip.codec import CodecError, decode_control, encode_control
from swarmnode.gossip.entries import Gossiped
from swarmnode.gossip.failure import ALIVE, DEAD, LEFT, SUSPECT, detection_deadline, spread_rounds
from swarmnode.gossip.inmemory import InMemoryNetwork
from swarmnode.gossip.member_table import Change
from swarmnode.gossip.membership import JoinTimeout, Membership, MembershipConfig, MembershipError
from swarmnode.gossip.records import to_wire
from swarmnode.gossip.transport import RemoteError

from tests.waiting import eventually

pytestmark = pytest.mark.timeout(60)

CFG = MembershipConfig()  # the defaults: interval 0.5 s, fanout 3, suspect 1.5 s, dead 2.5 s
FAST = MembershipConfig(
    gossip_interval=0.05,
    suspect_after=0.25,
    dead_after=0.5,
    tombstone_ttl=5.0,
    request_timeout=0.3,
    leave_timeout=0.3,
)


class FakeClock:
    def __init__(self, start: float = 1000.0) -> None:
        self.t = start

    def __call__(self) -> float:
        return self.t

    def advance(self, dt: float) -> None:
        self.t += dt


class Swarm:
    """Peers on one in-memory network. `round()` is one gossip interval of virtual time."""

    def __init__(self, cfg: MembershipConfig = CFG, clock: Callable[[], float] | None = None):
        self.net = InMemoryNetwork()
        self.cfg = cfg
        self.fake = FakeClock() if clock is None else None
        self.clock = clock or self.fake
        self.peers: dict[str, Membership] = {}

    def add(self, i: int, incarnation: int = 1, addr: str | None = None) -> Membership:
        addr = addr or f"10.0.0.{i}:7070"
        m = Membership(
            f"p{i}",
            addr,
            self.net.transport(addr),
            self.cfg,
            incarnation=incarnation,
            clock=self.clock,
            rng=random.Random(i),
        )
        self.net.register(addr, m.handlers())
        self.peers[m.self_id] = m
        return m

    def crash(self, peer_id: str) -> Membership:
        """The peer vanishes: no more answers, no more rounds (like SIGKILL)."""
        m = self.peers.pop(peer_id)
        self.net.unregister(m.addr)
        return m

    async def join_all(self, n: int) -> list[Membership]:
        ms = [self.add(i) for i in range(n)]
        for m in ms[1:]:
            await m.join([ms[0].addr], timeout=5.0)
        return ms

    async def round(self) -> None:
        for m in list(self.peers.values()):
            if not m.table.leaving:
                await m.gossip_round()
        self.fake.advance(self.cfg.gossip_interval)

    async def rounds_until(self, cond: Callable[[], bool], limit: int) -> int:
        for r in range(limit + 1):
            if cond():
                return r
            await self.round()
        raise AssertionError(f"condition not reached within {limit} rounds")

    def state_everywhere(self, peer_id: str) -> set[str | None]:
        views = [m.get(peer_id) for pid, m in self.peers.items() if pid != peer_id]
        return {None if v is None else v.state for v in views}

    def converged(self) -> bool:
        n = len(self.peers)
        return all(len(m.live_peers()) == n - 1 for m in self.peers.values())


async def close_all(ms: list[Membership]) -> None:
    await asyncio.gather(*(m.close() for m in ms))


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


@pytest.mark.timeout(120)
async def test_two_hundred_peers_in_one_process_converge_and_agree_on_a_death() -> None:
    # The in-memory network at the size it exists for: hundreds of real Membership objects,
    # real digests over the transport interface, one virtual clock.
    n = 200
    swarm = Swarm()
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


# --- routes and malformed input -----------------------------------------------------------


def _gossip(*entries: Gossiped | list, **extra: object) -> bytes:
    return encode_control(
        "gossip",
        sender="x",
        members=[to_wire(e) if isinstance(e, Gossiped) else e for e in entries],
        **extra,
    )


async def test_claims_that_we_are_dead_are_refuted_in_the_answer() -> None:
    swarm = Swarm()
    m = swarm.add(0, incarnation=5)
    body = _gossip(Gossiped("p0", m.addr, 5, 0, DEAD, 1.0, {}))
    answer = decode_control(await m.handlers()["gossip"](body), "gossip-ack")
    assert m.incarnation == 6
    assert m.self_member.state == ALIVE
    assert answer["members"][0][:5] == ["p0", m.addr, 6, 0, ALIVE]


@pytest.mark.parametrize(
    ("route", "body", "fragment"),
    [
        ("gossip", b"\xc1garbage", "malformed msgpack"),
        ("gossip", encode_control("join", member=[]), "expected message type gossip"),
        ("gossip", encode_control("gossip", sender="x"), "lacks field 'members'"),
        ("gossip", encode_control("gossip", members={"a": 1}), "has type dict"),
        ("gossip", _gossip(*[["x"]] * 2049), "exceeds the cap"),
        ("join", encode_control("join", member=["x"]), "array of 7"),
        ("join", encode_control("join"), "lacks field 'member'"),
        (
            "leave",
            encode_control("leave", member=to_wire(Gossiped("x", "h:1", 1, 1, ALIVE, 0.0, {}))),
            "left entry",
        ),
    ],
)
async def test_malformed_messages_raise_codec_error(route: str, body: bytes, fragment: str) -> None:
    m = Swarm().add(0)
    with pytest.raises(CodecError, match=fragment):
        await m.handlers()[route](body)


async def test_over_the_network_a_malformed_message_is_a_400() -> None:
    swarm = Swarm()
    m = swarm.add(0)
    with pytest.raises(RemoteError) as info:
        await swarm.net.transport("x:1").request(m.addr, "gossip", b"junk", timeout=1.0)
    assert info.value.status == 400


async def test_a_malformed_entry_is_dropped_and_logged_the_rest_merged(
    caplog: pytest.LogCaptureFixture,
) -> None:
    m = Swarm().add(0)
    good = Gossiped("p1", "10.0.0.1:7070", 1, 3, ALIVE, 0.0, {"step": 1})
    await m.handlers()["gossip"](_gossip(good, ["p2", "no port", 1, 1, ALIVE, 0.0, {}]))
    assert [p.peer_id for p in m.members()] == ["p1"]
    assert "dropped 1 malformed entries" in caplog.text and "bad address" in caplog.text


async def test_a_joiner_with_our_own_id_is_refused_with_409_and_fails_at_once() -> None:
    swarm = Swarm()
    seed = swarm.add(0)
    impostor = Membership("p0", "10.0.0.99:7070", swarm.net.transport("10.0.0.99:7070"), CFG)
    t0 = time.monotonic()
    with pytest.raises(MembershipError, match=r"own id.*`peer_id`") as info:
        await impostor.join([seed.addr], timeout=30.0)
    assert not isinstance(info.value, JoinTimeout)  # retrying cannot help: no 30 s wait
    assert time.monotonic() - t0 < 5.0
    assert seed.incarnation == 1  # no refutation war
    assert seed.members() == []


async def test_a_leaving_peer_refuses_joiners_so_they_try_another_seed() -> None:
    swarm = Swarm()
    a, b = swarm.add(0), swarm.add(1)
    await b.join([a.addr], timeout=5.0)
    await a.leave()
    c = swarm.add(2)
    with pytest.raises(JoinTimeout, match="leaving"):
        await c.join([a.addr], timeout=0.3)
    await c.join([a.addr, b.addr], timeout=5.0)  # a answers 503; a retry goes to b
    assert {m.peer_id for m in b.members()} >= {"p0", "p2"}
    assert "p2" not in {m.peer_id for m in a.members()}


async def test_digests_sent_are_capped() -> None:
    swarm = Swarm(MembershipConfig(max_digest=4))
    m = swarm.add(0)
    bodies: list[bytes] = []

    async def record(body: bytes) -> bytes:
        bodies.append(body)
        return encode_control("gossip-ack", members=[])

    fakes = [Gossiped(f"f{i}", f"10.9.0.{i}:1", 1, 1, ALIVE, 0.0, {}) for i in range(10)]
    for f in fakes:
        swarm.net.register(f.addr, {"gossip": record})
    await m.handlers()["gossip"](_gossip(*fakes[:3]))
    await m.handlers()["gossip"](_gossip(*fakes[3:6]))
    await m.handlers()["gossip"](_gossip(*fakes[6:]))
    assert await m.gossip_round() == 3
    for body in bodies:
        members = decode_control(body, "gossip")["members"]
        assert len(members) == 4 and members[0][0] == "p0"


# --- join --------------------------------------------------------------------------------


async def test_join_times_out_naming_the_seeds_and_the_timeout() -> None:
    swarm = Swarm()
    m = swarm.add(0)
    start = time.monotonic()
    with pytest.raises(JoinTimeout) as info:
        await m.join(["10.1.1.1:7070", "10.1.1.2:7070"], timeout=0.4)
    assert time.monotonic() - start < 3.0
    msg = str(info.value)
    assert "10.1.1.1:7070" in msg and "10.1.1.2:7070" in msg and "0.4 s" in msg
    assert "PeerUnreachable" in msg
    assert 2 < swarm.net.stats["requests"] < 60  # retried, with backoff rather than spinning


async def test_join_retries_until_a_seed_comes_up() -> None:
    swarm = Swarm()
    seed = Membership("s", "10.0.0.200:7070", swarm.net.transport("10.0.0.200:7070"), CFG)
    m = swarm.add(1)
    loop = asyncio.get_running_loop()
    loop.call_later(0.2, swarm.net.register, seed.addr, seed.handlers())
    await m.join(["10.0.0.201:7070", seed.addr], timeout=10.0)
    assert [p.peer_id for p in m.live_peers()] == ["s"]
    assert swarm.net.stats["unreachable"] >= 2


async def test_join_with_only_ourselves_as_seed_starts_a_new_swarm() -> None:
    swarm = Swarm()
    m = swarm.add(0)
    await m.join([m.addr], timeout=1.0)
    await m.join([], timeout=1.0)
    assert swarm.net.stats["requests"] == 0


# --- API odds and ends ------------------------------------------------------------------


async def test_change_listeners_are_called_unsubscribed_and_isolated(
    caplog: pytest.LogCaptureFixture,
) -> None:
    swarm = Swarm()
    seed = swarm.add(0)
    seen: list[Change] = []

    def broken(change: Change) -> None:
        raise RuntimeError("listener bug")

    seed.on_change(broken)
    unsubscribe = seed.on_change(seen.append)
    await swarm.add(1).join([seed.addr], timeout=5.0)
    assert [(c.peer_id, c.old, c.new) for c in seen] == [("p1", None, ALIVE)]
    assert "listener failed" in caplog.text
    unsubscribe()
    await swarm.add(2).join([seed.addr], timeout=5.0)
    assert len(seen) == 1


def test_set_meta_merges_keys_and_rejects_bad_values() -> None:
    m = Swarm().add(0)
    m.set_meta(step=1, device="cpu")
    m.set_meta(step=2)
    assert m.self_member.meta == {"step": 2, "device": "cpu"}
    with pytest.raises(MembershipError, match="type list"):
        m.set_meta(loss=[1.0])


@pytest.mark.parametrize(
    ("changes", "fragment"),
    [
        ({"fanout": 0}, "`fanout`"),
        ({"suspect_after": 0.5}, "`suspect_after`"),
        ({"dead_after": 1.0}, "`dead_after`"),
        ({"request_timeout": 0}, "request_timeout"),
        ({"max_digest": 1}, "max_digest"),
    ],
)
def test_bad_config_is_rejected_naming_the_setting(changes: dict, fragment: str) -> None:
    with pytest.raises(MembershipError, match=fragment):
        CFG.replace(**changes)


@pytest.mark.parametrize(
    ("interval", "kw", "expected"),
    [
        (0.5, {}, (1.5, 2.5, 60.0)),  # the defaults
        (0.1, {}, (1.5, 2.5, 60.0)),  # never more eager than the defaults
        (2.0, {}, (6.0, 10.0, 60.0)),  # 3 and 5 silent intervals
        (2.0, {"suspect_after": 9.0}, (9.0, 11.0, 60.0)),
        (1.0, {"dead_after": 30.0}, (3.0, 30.0, 120.0)),
    ],
)
def test_config_for_interval_scales_the_unset_timeouts(
    interval: float, kw: dict, expected: tuple
) -> None:
    cfg = MembershipConfig.for_interval(interval, fanout=4, **kw)
    assert (cfg.suspect_after, cfg.dead_after, cfg.tombstone_ttl) == expected
    assert (cfg.gossip_interval, cfg.fanout) == (interval, 4)


def test_bad_identity_is_rejected() -> None:
    net = InMemoryNetwork()
    with pytest.raises(MembershipError, match="incarnation"):
        Membership("p", "h:1", net.transport("h:1"), incarnation=-1)
    with pytest.raises(MembershipError, match="peer id"):
        Membership("", "h:1", net.transport("h:1"))


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
