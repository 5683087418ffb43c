"""A forged "dial me back" (node/peer/reach.py, `dialback_handlers`): a member can only have
itself dialled, at the address in its own signed record; one that puts a third party's address
there (or a flock of sybils that do) gets that third party dialled a bounded number of times,
with a small request, and the third party's answer does not count as the asker's. The handler
is driven directly, with `signed_by` as the envelope check sets it, on the in-memory network."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from swarmnode.gossip.errors import RemoteError
from swarmnode.gossip.link.inmemory import InMemoryNetwork
from swarmnode.gossip.link.transport import Arrival
from swarmnode.gossip.membership import ALIVE
from swarmnode.gossip.wire import decode_control, encode_control
from swarmnode.node.peer.reach import DIAL_BURST, DialRate, dialback_handlers

pytestmark = pytest.mark.timeout(20)


class Records:
    """Members and the addresses their own signed records name."""

    def __init__(self, addrs: dict[str, str]) -> None:
        self.addrs = addrs

    def get(self, peer_id: str) -> SimpleNamespace | None:
        addr = self.addrs.get(peer_id)
        return None if addr is None else SimpleNamespace(addr=addr, state=ALIVE)


def _victim(net: InMemoryNetwork) -> list[bytes]:
    """A third party at victim:1 that answers `reach` as itself; what it was sent."""
    got: list[bytes] = []

    async def reach(req: Arrival) -> bytes:
        got.append(bytes(req.body))
        msg = decode_control(req.body, "reach")
        return encode_control("reach-ack", peer_id="victim", nonce=msg["nonce"])

    net.register("victim:1", {"reach": reach})
    return got


async def _ask(handler, asker: str, **body: object) -> dict:
    raw = await handler(Arrival(encode_control("dialback", **body), signed_by=asker))
    return decode_control(raw, "dialback-ack")


async def test_the_address_in_the_request_is_never_dialled() -> None:
    net = InMemoryNetwork()
    victim = _victim(net)
    dialled: list[str] = []

    async def asker_reach(req: Arrival) -> bytes:
        dialled.append("asker")
        msg = decode_control(req.body, "reach")
        return encode_control("reach-ack", peer_id="asker", nonce=msg["nonce"])

    net.register("asker:1", {"reach": asker_reach})
    handler = dialback_handlers("me", Records({"asker": "asker:1"}), net.transport("me:1"))[
        "dialback"
    ]
    ack = await _ask(handler, "asker", addr="victim:1", peer="victim:1", host="victim")
    assert ack["ok"] is True and ack["addr"] == "asker:1"
    assert dialled == ["asker"] and victim == []


async def test_a_member_whose_record_names_a_third_party_gets_it_dialled_boundedly() -> None:
    net = InMemoryNetwork()
    victim = _victim(net)
    # 20 sybil members, each record naming the victim's address, each asking 5 times
    sybils = {f"s{i}": "victim:1" for i in range(20)}
    rate = DialRate(window_s=60.0, every_s=10.0, clock=lambda: 0.0)  # all within one window
    handler = dialback_handlers("me", Records(sybils), net.transport("me:1"), rate)["dialback"]
    acks, refused = [], 0
    for _ in range(5):
        for sybil in sybils:
            try:
                acks.append(await _ask(handler, sybil))
            except RemoteError as exc:
                assert exc.status == 429
                refused += 1
    assert len(victim) == DIAL_BURST and refused == 100 - DIAL_BURST  # the whole window's
    assert all(len(body) < 128 for body in victim)  # a nonce, no payload to amplify
    # the victim answers as itself: not the asker, so it proves nothing
    assert all(a["ok"] is False and "another peer answers" in a["why"] for a in acks)


async def test_a_stranger_or_a_dead_member_is_refused_before_any_dial() -> None:
    net = InMemoryNetwork()
    victim = _victim(net)
    records = Records({"gone": "victim:1"})
    records.get = lambda pid, base=records.get: (  # "gone" is dead in our table
        SimpleNamespace(addr="victim:1", state="dead") if pid == "gone" else base(pid)
    )
    handler = dialback_handlers("me", records, net.transport("me:1"))["dialback"]
    for asker in ("", "stranger", "gone"):
        with pytest.raises(RemoteError) as refused:
            await _ask(handler, asker)
        assert refused.value.status == 403
        # a clear refusal, logged at DEBUG: a joiner asks members that have not heard of it yet
        assert refused.value.said
    assert victim == []
