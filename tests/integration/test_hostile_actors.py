"""The hostile actors of swarmnode.fault.hostile against in-process peers: each really attacks
(a sybil flood lists its sybils where admission is open, up to the source's burst) and each
reports, by its own count, what got through (the bar the chaos scenarios assert: 0)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from swarmnode.fault.hostile import ForgedRecords, SybilFlood
from swarmnode.fault.hostile.forged import HIJACK_ADDR
from swarmnode.gossip.auth.peer_key import PeerKey
from swarmnode.node.peer.node import Node

from tests.integration.inprocess import peer_config
from tests.waiting import eventually

pytestmark = pytest.mark.timeout(120)


@pytest.fixture
async def swarm() -> AsyncIterator[list[Node]]:
    a = await Node.create(peer_config())
    nodes = [a]
    try:
        nodes.append(await Node.create(peer_config(join=[a.addr])))
        b = nodes[1]
        await eventually(lambda: _alive(a, b), 20, "a to see b")
        yield nodes
    finally:
        for node in reversed(nodes):
            await node.close()


def _alive(observer: Node, peer: Node) -> bool:
    m = observer.membership.get(peer.peer_id)
    return m is not None and m.state == "alive"


async def test_a_sybil_flood_is_listed_where_admission_is_open_within_the_burst(swarm) -> None:
    a, b = swarm
    burst = a.membership.cfg.new_member_burst
    flood = SybilFlood(a.addr, burst + 100, 2.0, observers=lambda: [a.addr, b.addr])
    await flood.run(4.0)  # 4 s of flooding, after its keys are made
    report = flood.report()
    assert report["statuses"].get("gossip 200", 0) >= 1 and report["messages"] >= 1
    # the actor works (open admission is no defence), and each source's bucket bounds it: b
    # hears them from a (one source), a from the attacker; the buckets refill at their rate
    refill = a.membership.cfg.new_member_rate * 6.0  # the run, with room for a loaded box
    assert 0 < report["listed_max"] <= burst + refill
    assert report["accepted"] == report["listed_max"]


async def test_a_sybil_flood_lists_nothing_in_a_closed_swarm(tmp_path) -> None:
    trust = tmp_path / "trust.keys"
    trust.write_text(PeerKey.generate().public_hex + "\n")
    a = await Node.create(peer_config(admission="trust", trust_file=str(trust)))
    try:
        flood = SybilFlood(a.addr, 300, 2.0, observers=lambda: [a.addr])
        await flood.run(3.0)
        report = flood.report()
        assert report["statuses"].get("join 403", 0) >= 1  # joins refused: not trusted
        assert report["accepted"] == 0 and a.membership.members() == []
    finally:
        await a.close()


async def test_forged_records_about_a_live_peer_are_never_accepted(swarm) -> None:
    a, b = swarm
    forged = ForgedRecords(a.addr, b.peer_id, 10.0, observers=lambda: [a.addr], observe_every=0.2)
    await forged.run(2.0)
    report = forged.report()
    assert report["captured"] and report["messages"] >= 10 and report["observations"] >= 5
    assert report["accepted"] == 0, report["shown"]
    member = a.membership.get(b.peer_id)
    assert member.state == "alive" and member.addr == b.addr and member.incarnation < 2**53


def test_the_forged_records_actor_sees_each_lie_it_tells() -> None:
    forged = ForgedRecords("127.0.0.1:1", "victim", 1.0)
    assert forged._lie_shown({"peer_id": "victim", "state": "alive", "addr": "h:1"}) == ""
    assert "left" in forged._lie_shown({"peer_id": "victim", "state": "left"})
    assert "address" in forged._lie_shown({"peer_id": "victim", "addr": HIJACK_ADDR})
    assert "incarnation" in forged._lie_shown({"peer_id": "victim", "incarnation": 2**62})
    assert "made-up" in forged._lie_shown({"peer_id": forged._fake_ids[0]})
    assert forged._lie_shown({"peer_id": "someone-else", "state": "left"}) == ""
