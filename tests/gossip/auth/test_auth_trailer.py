"""Envelope v5's trailer (gossip/auth/signer.py): every tampering with it is refused before anything
parses the body, a v4 envelope is refused by name, and a seal streamed while it is written is
byte for byte the seal made at once."""

from __future__ import annotations

import os
from collections.abc import Callable

import numpy as np
import pytest
from swarmnode.gossip.auth import signer as auth
from swarmnode.gossip.auth.peer_key import PeerKey
from swarmnode.gossip.auth.signer import SIGNED_ROUTES, TRAILER_BYTES, Signer
from swarmnode.gossip.auth.transport import AuthTransport, auth_handlers
from swarmnode.gossip.errors import AuthError, RemoteError
from swarmnode.gossip.link.inmemory import InMemoryNetwork
from swarmnode.gossip.link.transport import Arrival, completed
from swarmnode.node.net.transport import write_body

pytestmark = pytest.mark.timeout(30)

SECRET = "s3cret"
NOW = 1_700_000_000.0
A, B = PeerKey.generate(), PeerKey.generate()


def sealer(secret: str | None = SECRET) -> Signer:
    return Signer(secret, key=A, signed_routes=SIGNED_ROUTES, name="a:1", clock=lambda: NOW)


def opener(secret: str | None = SECRET) -> Signer:
    keys = {A.peer_id: A.public}.get
    return Signer(
        secret, key=B, keys=keys, signed_routes=SIGNED_ROUTES, name="b:1", clock=lambda: NOW
    )


def flip(at: Callable[[int], int]) -> Callable[[bytes], bytes]:
    def change(sealed: bytes) -> bytes:
        out = bytearray(sealed)
        out[at(len(out))] ^= 0x01
        return bytes(out)

    return change


def names_overrun(sealed: bytes) -> bytes:
    """The signer's length byte claims 255 bytes: the names run into the body and trailer."""
    out = bytearray(sealed)
    pos = auth.FIXED_BYTES
    for _ in range(2):  # past sender and receiver
        pos += 1 + out[pos]
    out[pos] = 255
    return bytes(out)


TAMPERINGS: dict[str, Callable[[bytes], bytes]] = {
    "body byte flipped": flip(lambda n: n - TRAILER_BYTES - 1),
    "head byte flipped (timestamp)": flip(lambda n: auth.MAGIC_BYTES + 7),
    "tag flipped": flip(lambda n: n - TRAILER_BYTES),
    "signature flipped": flip(lambda n: n - 1),
    "trailer truncated by one byte": lambda s: s[:-1],
    "trailer cut off": lambda s: s[:-TRAILER_BYTES],
    "an extra byte after the trailer": lambda s: s + b"\0",
    "an extra byte before the trailer": lambda s: s[:-TRAILER_BYTES] + b"\0" + s[-TRAILER_BYTES:],
    "trailer moved to the front (v3 order)": lambda s: (
        s[:4] + s[-TRAILER_BYTES:] + s[4:-TRAILER_BYTES]
    ),
    "a name's length lies": names_overrun,
    "only the header": lambda s: s[: auth.HEADER_BYTES + 8],
}


@pytest.mark.parametrize("secret", [SECRET, None])
@pytest.mark.parametrize("what", sorted(TAMPERINGS))
def test_a_tampered_trailer_is_refused(what: str, secret: str | None) -> None:
    sealed = bytes(sealer(secret).seal("pushpull", b"model bytes " * 9, to="b:1"))
    assert opener(secret).open("pushpull", sealed) == b"model bytes " * 9  # untouched: opens
    with pytest.raises(AuthError):
        opener(secret).open("pushpull", TAMPERINGS[what](sealed))


@pytest.mark.parametrize("what", sorted(TAMPERINGS))
async def test_a_tampered_request_never_reaches_the_handler(what: str) -> None:
    net = InMemoryNetwork()
    parsed: list[bytes] = []

    async def handler(req: Arrival) -> bytes:
        body = req.body
        parsed.append(bytes(body))
        return b"ok"

    net.register("b:1", auth_handlers({"pushpull": handler}, opener()))
    sealed = bytes(sealer().seal("pushpull", b"x" * 100, to="b:1"))
    with pytest.raises(RemoteError) as info:
        await net.transport("a:1").request("b:1", "pushpull", TAMPERINGS[what](sealed), timeout=5)
    assert info.value.status in (401, 403) and parsed == []


def test_a_v4_envelope_is_refused_by_its_version_in_one_line() -> None:
    """A v4 peer (its tag and signature only in a trailer) is told both versions, in one
    line, whatever the length of what it sent; so is a v3 one (tag and signature first)."""
    v4 = b"SNA4" + bytes(8 + 16) + b"\x03a:1\x03b:1\x00" + b"body" + bytes(96)
    for message, sent in ((v4, 4), (v4[:10], 4), (b"SNA3" + bytes(96) + v4[4:-96], 3)):
        with pytest.raises(
            AuthError, match=rf"envelope version {sent} from the sender, 5 at the receiver"
        ) as e:
            opener().open("pushpull", message)
        assert e.value.status == 426  # another release: a joiner gives up at once (issue 31)
        assert "\n" not in str(e.value)
    with pytest.raises(AuthError, match="no envelope"):
        opener().open("pushpull", b"XXXX" + v4[4:])


@pytest.mark.parametrize("secret", [SECRET, None])
@pytest.mark.parametrize("reply_to", [b"", b"n" * 16])
async def test_a_streamed_seal_equals_an_inline_seal(monkeypatch, secret, reply_to) -> None:
    monkeypatch.setattr(os, "urandom", lambda n: bytes(range(n)))  # the same nonce twice
    body = np.random.default_rng(1).integers(0, 256, (5 << 20) + 3, dtype=np.uint8)
    inline = bytes(sealer(secret).seal_parts("pushpull", body, to="b:1", reply_to=reply_to))
    streamed = sealer(secret).seal_streamed("pushpull", body, to="b:1", reply_to=reply_to)
    written = Recorder()
    await write_body(written, streamed)  # slice by slice, as the transports send it
    await streamed.close()
    assert len(streamed) == len(inline) and bytes(written.data) == inline
    again = sealer(secret).seal_streamed("pushpull", body, to="b:1", reply_to=reply_to)
    assert bytes(await completed(again)) == inline  # what the in-memory network sends


async def test_a_large_exchange_streams_its_seals_on_both_sides(monkeypatch) -> None:
    """Over the in-memory network too: a 3 MB request and its answer round-trip sealed."""
    net = InMemoryNetwork()
    streamed: list[int] = []
    real = Signer.seal_streamed

    def spy(self, route, body, **kw):  # type: ignore[no-untyped-def]
        streamed.append(memoryview(body).nbytes)
        return real(self, route, body, **kw)

    monkeypatch.setattr(Signer, "seal_streamed", spy)

    async def echo(req: Arrival) -> bytes:
        return bytes(req.body)

    net.register("b:1", auth_handlers({"pushpull": echo}, opener()))
    client = AuthTransport(net.transport("a:1"), sealer())
    body = os.urandom(3 << 20)
    assert await client.request("b:1", "pushpull", body, timeout=10) == body
    assert streamed == [len(body), len(body)]  # the request, then the answer


class Recorder:
    """A stream writer that keeps what it is given (copies: the caller's slices are views)."""

    def __init__(self) -> None:
        self.data = bytearray()

    async def write(self, chunk: bytes | memoryview) -> None:
        self.data += chunk
