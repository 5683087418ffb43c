"""Member-key signatures on the model routes (gossip/auth/signer.py) and the streaming digest."""

from __future__ import annotations

import asyncio

import blake3
import numpy as np
import pytest
from swarmnode.gossip.auth.peer_key import PeerKey
from swarmnode.gossip.auth.signer import MAGIC_BYTES, SIGNED_ROUTES, TRAILER_BYTES, Signer
from swarmnode.gossip.auth.stream_digest import StreamDigest
from swarmnode.gossip.auth.transport import AuthTransport, auth_handlers
from swarmnode.gossip.errors import AuthError, NotAMember, RemoteError
from swarmnode.gossip.exchange.access import check_sender
from swarmnode.gossip.link.inmemory import InMemoryNetwork
from swarmnode.gossip.link.transport import Arrival

from tests.gossip.exchange.exchange_fakes import RandomPeers

pytestmark = pytest.mark.timeout(30)

A, B, C = PeerKey.generate(), PeerKey.generate(), PeerKey.generate()


def signer(key: PeerKey, members: tuple[PeerKey, ...] = (), secret: str | None = None) -> Signer:
    keys = {k.peer_id: k.public for k in members}
    return Signer(secret, key=key, keys=keys.get, signed_routes=SIGNED_ROUTES)


@pytest.mark.parametrize("secret", [None, "s"])
def test_a_members_request_opens_with_its_id_and_a_strangers_is_403(secret) -> None:
    receiver = signer(B, members=(A,), secret=secret)
    opened = receiver.open_request("pushpull", signer(A, secret=secret).seal("pushpull", b"m"))
    assert opened.body == b"m" and opened.signed_by == A.peer_id
    with pytest.raises(NotAMember) as info:
        receiver.open_request("pushpull", signer(C, secret=secret).seal("pushpull", b"m"))
    assert info.value.status == 403


def test_a_signature_by_another_key_under_a_members_id_is_refused() -> None:
    sealed = bytearray(signer(A).seal("params", b"pull"))
    sealed[-64:] = C.sign(b"anything")  # C's signature where A's must be (the trailer's end)
    with pytest.raises(AuthError, match="bad signature") as info:
        signer(B, members=(A,)).open_request("params", bytes(sealed))
    assert info.value.status == 401


def test_unsigned_requests_on_a_signed_route_are_refused() -> None:
    plain = Signer("s")  # the secret, no member key: not a member's request
    with pytest.raises(NotAMember):
        signer(B, members=(A,), secret="s").open_request("params", plain.seal("params", b"x"))


def test_an_answer_without_a_secret_is_not_enveloped() -> None:
    s = signer(A)
    assert s.wraps("params") and not s.wraps("gossip") and not s.has_secret


async def test_the_handler_sees_the_signer_and_a_declared_sender_must_match() -> None:
    net = InMemoryNetwork()
    seen = []

    async def handler(req: Arrival) -> bytes:
        seen.append(req.signed_by)
        check_sender(RandomPeers([], seed=0), req.body.decode(), "pushpull", req.signed_by)
        return b"ok"

    net.register("b:1", auth_handlers({"pushpull": handler}, signer(B, members=(A,))))
    client = AuthTransport(net.transport("a:1"), signer(A))
    assert await client.request("b:1", "pushpull", A.peer_id.encode(), timeout=5) == b"ok"
    with pytest.raises(RemoteError) as info:  # signed by A, declared as C
        await client.request("b:1", "pushpull", C.peer_id.encode(), timeout=5)
    assert info.value.status == 403 and seen == [A.peer_id, A.peer_id]


async def test_the_streaming_digest_equals_one_pass_and_refuses_other_buffers() -> None:
    data = np.random.default_rng(0).integers(0, 256, 9_000_123, dtype=np.uint8)
    buf = memoryview(data)
    tap = StreamDigest(MAGIC_BYTES, step=1 << 20, tail=TRAILER_BYTES)
    for end in range(65_536, len(buf) + 65_536, 65_536):  # chunks as a socket delivers them
        tap.feed(buf, min(end, len(buf)))
        await asyncio.sleep(0)
    covered = buf[MAGIC_BYTES : len(buf) - TRAILER_BYTES]  # between the magic and the trailer
    assert await tap.finish(buf) == blake3.blake3(covered).digest()
    lead = StreamDigest(0, step=1 << 20, lead=b"head")  # a sender's: the head, then the body
    lead.feed(buf, len(buf))
    assert await lead.finish(buf) == blake3.blake3(b"head" + bytes(buf)).digest()
    other = StreamDigest(MAGIC_BYTES)
    other.feed(buf, len(buf))
    assert await other.finish(memoryview(data.copy())) is None  # not the buffer it saw
    mixed = StreamDigest(MAGIC_BYTES)
    mixed.feed(buf, 10)
    mixed.feed(memoryview(bytearray(20)), 20)  # a second reader on the same tap
    assert await mixed.finish(buf) is None
