"""Issue 10, membership half: each attack that once worked against real peers, tried again.

Two real peers (`Node`s with their aiohttp servers on 127.0.0.1) form a swarm; a hostile peer
written here speaks the real protocol to them over HTTP: signed records under its own keys, and
records forged or replayed for the honest peers. Each test fails if its attack works again.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest
from swarmnode.gossip.auth.peer_key import PeerKey
from swarmnode.gossip.membership.records import to_wire
from swarmnode.gossip.wire.control import encode_control
from swarmnode.node.peer.node import Node

from tests.integration.inprocess import peer_config
from tests.signed import signed_entry
from tests.waiting import eventually

pytestmark = pytest.mark.timeout(120)


@pytest.fixture
async def swarm() -> AsyncIterator[list[Node]]:
    a = await Node.create(peer_config())
    nodes = [a]
    try:
        nodes.append(await Node.create(peer_config(join=[a.addr])))
        await eventually(lambda: _state(a, nodes[1]) == "alive", 20, "a to see b")
        yield nodes
    finally:
        for node in reversed(nodes):
            await node.close()


def _state(observer: Node, peer: Node) -> str | None:
    m = observer.membership.get(peer.peer_id)
    return None if m is None else str(m.state)


def _record_of(observer: Node, peer: Node) -> list[Any]:
    """The signed record `observer` relays for `peer`, as it travels (captured, replayable)."""
    for g in observer.membership.table.digest(time.monotonic()):
        if g.peer_id == peer.peer_id:
            return to_wire(g)
    raise AssertionError(f"{observer.peer_id} relays no record of {peer.peer_id}")


async def _gossip(http: aiohttp.ClientSession, node: Node, entries: list[Any]) -> int:
    body = encode_control("gossip", sender="hostile", members=entries)
    async with http.post(f"http://{node.addr}/v1/gossip", data=body) as resp:
        await resp.read()
        return resp.status


@pytest.fixture
async def http() -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession() as session:
        yield session


async def test_incarnation_overflow_changes_nothing(swarm, http) -> None:
    a, b = swarm
    before = b.membership.incarnation
    hostile = PeerKey.generate()
    huge = 2**64 - 1
    # the old 81-byte attack (unsigned, b's id), and a signed one under b's id with another key
    raw = [b.peer_id, "127.0.0.1:9", huge, 0, "alive", 0.0, {}]
    forged = signed_entry(hostile, peer_id=b.peer_id, inc=2**62)
    for entries in ([raw], [forged], [signed_entry(hostile, inc=2**53)]):
        await _gossip(http, b, entries)
        await _gossip(http, a, entries)
    assert b.membership.incarnation == before
    assert a.membership.get(b.peer_id).incarnation == before
    assert a.membership.get(hostile.peer_id) is None  # its own record beyond 2^53: refused
    hb = a.membership.get(b.peer_id).heartbeat
    await eventually(lambda: a.membership.get(b.peer_id).heartbeat > hb, 10, "b's next beat")
    assert _state(a, b) == "alive" and b.crashed is None


async def test_a_forged_left_never_marks_a_live_peer_left(swarm, http) -> None:
    a, b = swarm
    captured = _record_of(a, b)
    hostile = PeerKey.generate()
    left_claims = [
        [captured[0], captured[1], "left", 0.0],  # b's real record with a `left` hint
        signed_entry(hostile, peer_id=b.peer_id, state="left", hb=10**6),  # b's id, wrong key
    ]
    for _ in range(20):
        for claim in left_claims:
            await _gossip(http, a, [claim])
        assert _state(a, b) == "alive"


async def test_an_address_hijack_is_refused(swarm, http) -> None:
    a, b = swarm
    hostile = PeerKey.generate()
    hijack = signed_entry(hostile, peer_id=b.peer_id, addr="127.0.0.1:6666", inc=2**62)
    assert await _gossip(http, a, [hijack]) == 200  # answered, its entry dropped
    member = a.membership.get(b.peer_id)
    assert member.addr == b.addr and member.incarnation < 2**62


async def test_a_replayed_old_record_does_not_roll_a_peer_back(swarm, http) -> None:
    a, b = swarm
    old = _record_of(a, b)
    hb = a.membership.get(b.peer_id).heartbeat
    await eventually(lambda: a.membership.get(b.peer_id).heartbeat > hb + 2, 10, "b to beat")
    now = a.membership.get(b.peer_id).heartbeat
    await _gossip(http, a, [old])
    assert a.membership.get(b.peer_id).heartbeat >= now


async def test_sybils_without_admission_are_never_listed(http) -> None:
    # a closed swarm (trust): 1000 sybils, validly signed by their own keys, joined and gossiped
    a = await Node.create(peer_config(admission="trust", trust_file=_trust_file([])))
    try:
        sybils = [PeerKey.generate() for _ in range(1000)]
        for k in sybils[:50]:  # joins, one by one, like 50 fake peers
            body = encode_control("join", member=signed_entry(k))
            async with http.post(f"http://{a.addr}/v1/join", data=body) as resp:
                assert resp.status == 403
        for i in range(0, 1000, 250):  # and gossiped in bulk, as if relayed
            await _gossip(http, a, [signed_entry(k) for k in sybils[i : i + 250]])
        assert a.membership.members() == []
    finally:
        await a.close()


async def test_sybils_in_an_open_swarm_are_rate_limited(swarm, http) -> None:
    a, _ = swarm
    burst = a.membership.cfg.new_member_burst
    sybils = [PeerKey.generate() for _ in range(2 * burst)]
    await _gossip(http, a, [signed_entry(k) for k in sybils])
    listed = len(a.membership.members()) - 1
    assert listed <= burst  # one source: at most its burst, whatever it sends


async def test_a_table_flood_stays_within_the_cap(http) -> None:
    # 18,000 fake entries in 9 messages of 2,000 (unsigned, forged, and validly signed), 18x
    # the cap; scripts/bench/membership/hostile.py floods 100,000 (the suite's clock is the limit:
    # 15 messages took 46 s under xdist, most of it drawing the signed entries' hash chains)
    a = await Node.create(peer_config())
    try:
        cap = a.membership.cfg.max_members
        signers = [PeerKey.generate() for _ in range(400)]
        worst_stall = 0.0
        for i in range(9):
            if i % 3 == 0:
                entries = [
                    [f"f{i}-{j}", "127.0.0.1:9", 1, 1, "alive", 0.0, {}] for j in range(2000)
                ]
            elif i % 3 == 1:
                entries = [signed_entry(signers[0], peer_id=f"x{i}-{j}") for j in range(2000)]
            else:
                entries = [signed_entry(signers[j % 400], hb=i) for j in range(2000)]
            t = time.perf_counter()
            await _gossip(http, a, entries)
            worst_stall = max(worst_stall, time.perf_counter() - t)
        assert len(a.membership.table) <= cap
        t = time.perf_counter()
        async with http.get(f"http://{a.addr}/v1/status") as resp:
            status = await resp.json()
        assert time.perf_counter() - t < 1.0
        assert len(status["members"]) <= cap
        # one 2,000-entry message, HTTP round trip included, on a loaded 2-core box (was: 83,882
        # members, 11.5 s status, stalls to 0.94 s per 2,047-entry message)
        assert worst_stall < 5.0
    finally:
        await a.close()


def _trust_file(keys: list[PeerKey]) -> str:
    import tempfile

    fh = tempfile.NamedTemporaryFile("w", suffix=".keys", delete=False)
    # trust needs one key at least: a key nobody in the test holds stands for the others
    fh.write("\n".join(k.public_hex for k in [*keys, PeerKey.generate()]) + "\n")
    fh.close()
    return fh.name
