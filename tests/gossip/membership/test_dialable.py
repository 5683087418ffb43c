"""Outbound-only members are never dial targets (issue 31): the filter, and the gossip round
that uses it, on the in-memory network."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from swarmnode.gossip.membership import OUTBOUND, REACH, dialable, outbound_only

pytestmark = pytest.mark.timeout(10)


def _m(pid: str, **meta: object) -> SimpleNamespace:
    return SimpleNamespace(peer_id=pid, state="alive", meta=meta)


def test_only_a_members_own_outbound_word_keeps_it_out():
    members = [_m("a"), _m("b", reach=OUTBOUND), _m("c", reach="direct"), _m("d", reach=1)]
    assert [m.peer_id for m in dialable(members)] == ["a", "c", "d"]
    assert outbound_only(members[1]) and not outbound_only(members[3])


async def test_a_gossip_round_never_dials_an_outbound_only_member_but_learns_it():
    from swarmnode.gossip.link import InMemoryNetwork
    from swarmnode.gossip.membership import Membership, MembershipConfig

    net = InMemoryNetwork()
    cfg = MembershipConfig(fanout=3)
    names = ("a", "b", "home")
    addr = {n: f"10.0.0.{i + 1}:7070" for i, n in enumerate(names)}
    peers = {n: Membership(n, addr[n], net.transport(addr[n]), cfg) for n in names}
    for n, p in peers.items():
        net.register(addr[n], p.handlers())
    peers["home"].set_meta(**{REACH: OUTBOUND})
    await peers["b"].join([addr["a"]], timeout=5)
    await peers["home"].join([addr["a"]], timeout=5)
    for _ in range(3):  # home's own gossip spreads its record (and its heartbeat)
        await peers["home"].gossip_round()
    for n in ("a", "b"):
        got = peers[n].get("home")
        assert got is not None and got.meta.get(REACH) == OUTBOUND
        for _ in range(5):
            assert "home" not in {m.peer_id for m in peers[n].tick()}
            assert "home" not in {m.peer_id for m in peers[n].dialable_peers()}
