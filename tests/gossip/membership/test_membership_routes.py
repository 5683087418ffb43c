"""Membership routes: malformed input, refutation in answers, joins, the API's odds and ends."""

from __future__ import annotations

import asyncio
import time

import pytest
from swarmnode.gossip.errors import CodecError, JoinTimeout, MembershipError, RemoteError
from swarmnode.gossip.link.inmemory import InMemoryNetwork
from swarmnode.gossip.link.transport import Arrival
from swarmnode.gossip.membership.entries import Gossiped
from swarmnode.gossip.membership.failure import ALIVE, DEAD
from swarmnode.gossip.membership.records import to_wire
from swarmnode.gossip.membership.service import Membership, MembershipConfig
from swarmnode.gossip.membership.table import Change
from swarmnode.gossip.wire.control import decode_control, encode_control

from tests.gossip.membership.membership_harness import CFG, Swarm

pytestmark = pytest.mark.timeout(60)


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
    answer = decode_control(await m.handlers()["gossip"](Arrival(body)), "gossip-ack")
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
        await m.handlers()[route](Arrival(body))


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
    await m.handlers()["gossip"](Arrival(_gossip(good, ["p2", "no port", 1, 1, ALIVE, 0.0, {}])))
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

    async def record(req: Arrival) -> bytes:
        body = req.body
        bodies.append(body)
        return encode_control("gossip-ack", members=[])

    fakes = [Gossiped(f"f{i}", f"10.9.0.{i}:1", 1, 1, ALIVE, 0.0, {}) for i in range(10)]
    for f in fakes:
        swarm.net.register(f.addr, {"gossip": record})
    await m.handlers()["gossip"](Arrival(_gossip(*fakes[:3])))
    await m.handlers()["gossip"](Arrival(_gossip(*fakes[3:6])))
    await m.handlers()["gossip"](Arrival(_gossip(*fakes[6:])))
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
    assert "unreachable" in msg and "join-timeout" in msg  # what happened, in words
    assert 2 < swarm.net.stats["requests"] < 60  # retried, with backoff rather than spinning


async def test_a_failed_join_attempt_is_said_at_once_once_per_seed_with_the_time_left(
    caplog,
) -> None:
    caplog.set_level("INFO")
    swarm = Swarm()
    m = swarm.add(0)
    with pytest.raises(JoinTimeout):
        await m.join(["10.1.1.1:7070"], timeout=0.6)
    said = [r.getMessage() for r in caplog.records if "seed 10.1.1.1:7070" in r.getMessage()]
    assert len(said) == 1, said  # not once per retry
    assert "retrying for up to" in said[0] and "join-timeout" in said[0]


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("a:1: ClientConnectorError: Cannot connect to host a:1 ssl:default [Connect call "
         "failed ('127.0.0.1', 1)]", "connection refused"),
        ("a:1: ClientConnectorError: [Errno 113] No route to host", "no route"),
        ("a:1: ClientConnectorDNSError: Name or service not known", "does not resolve"),
    ],
)  # fmt: skip
def test_why_a_seed_is_unreachable_is_said_in_words_not_aiohttp_text(text, words) -> None:
    from swarmnode.gossip.errors import PeerUnreachable, RequestTimeout
    from swarmnode.gossip.membership.service import _what_happened

    said = _what_happened(PeerUnreachable(text))
    assert words in said and "ssl:default" not in said
    assert "no answer" in _what_happened(RequestTimeout("a:1: no answer within 2.00s"))


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
