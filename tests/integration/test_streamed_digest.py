"""Over real HTTP, a large envelope is hashed while it is sent and while it arrives, on both
sides (issue 10: signing cost): the request on the server, the answer on the client.
`open_body` must get the digest the transport's tap computed, not hash the body again, and
a sender streams its seal (envelope v5's trailer) instead of hashing before its first byte."""

from __future__ import annotations

import aiohttp
import pytest
from swarmnode.gossip.auth.peer_key import PeerKey
from swarmnode.gossip.auth.signer import SIGNED_ROUTES, TRAILER_BYTES, Signer
from swarmnode.gossip.auth.transport import AuthTransport, auth_handlers
from swarmnode.gossip.link.transport import Arrival
from swarmnode.node.net.app import build_app, serve
from swarmnode.node.net.transport import HttpTransport

pytestmark = pytest.mark.timeout(60)

SIZE = 3 << 20  # past INLINE_BYTES: the bulk path


async def test_both_sides_open_with_the_streamed_digest(monkeypatch) -> None:
    a, b = PeerKey.generate(), PeerKey.generate()
    server = Signer("s", key=b, keys={a.peer_id: a.public}.get, signed_routes=SIGNED_ROUTES)
    client = Signer("s", key=a, signed_routes=SIGNED_ROUTES)
    given: list[bool] = []
    real = Signer.open_body

    def spy(self, head, data, *, digest=None):  # type: ignore[no-untyped-def]
        given.append(digest is not None)
        return real(self, head, data, digest=digest)

    monkeypatch.setattr(Signer, "open_body", spy)
    inline: list[int] = []
    real_seal = Signer.seal_parts

    def seal_spy(self, route, body, **kw):  # type: ignore[no-untyped-def]
        inline.append(len(body))
        return real_seal(self, route, body, **kw)

    monkeypatch.setattr(Signer, "seal_parts", seal_spy)

    async def echo(req: Arrival) -> bytes:
        return bytes(req.body)

    app = build_app(auth_handlers({"pushpull": echo}, server), tap=server.tap)
    runner, port = await serve(app, "127.0.0.1", 0)
    server.name = f"127.0.0.1:{port}"
    transport = AuthTransport(HttpTransport(), client)
    try:
        body = bytes(range(256)) * (SIZE // 256)
        answer = await transport.request(server.name, "pushpull", body, timeout=30)
        assert bytes(answer) == body
        assert given == [True, True]  # the server's request, then the client's answer
        assert inline == []  # both seals were streamed: neither side hashed before sending
    finally:
        await transport.close()
        await runner.cleanup()


def flipped(sealed: bytes, at: int) -> bytes:
    out = bytearray(sealed)
    out[at] ^= 0x80
    return bytes(out)


async def test_a_tampered_large_envelope_is_refused_and_never_handled() -> None:
    """The streamed digest stops short of the trailer: a changed body, tag or signature, a cut
    or an extended trailer are each answered 401 (the body hashed on arrival, never parsed)."""
    a, b = PeerKey.generate(), PeerKey.generate()
    server = Signer("s", key=b, keys={a.peer_id: a.public}.get, signed_routes=SIGNED_ROUTES)
    handled: list[int] = []

    async def handler(req: Arrival) -> bytes:
        body = req.body
        handled.append(len(body))
        return b"ok"

    app = build_app(auth_handlers({"pushpull": handler}, server), tap=server.tap)
    runner, port = await serve(app, "127.0.0.1", 0)
    server.name = f"127.0.0.1:{port}"
    client = Signer("s", key=a, signed_routes=SIGNED_ROUTES, name="127.0.0.1:9")
    url = f"http://{server.name}/v1/pushpull"

    def sealed() -> bytes:
        return bytes(client.seal("pushpull", bytes(SIZE), to=server.name))

    n = len(sealed())
    attacks = {
        "body byte": flipped(sealed(), n - TRAILER_BYTES - 5),
        "tag byte": flipped(sealed(), n - TRAILER_BYTES + 3),
        "signature byte": flipped(sealed(), n - 3),
        "trailer cut by one": sealed()[:-1],
        "a byte appended": sealed() + b"!",
    }
    try:
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=30)) as http:
            for what, body in attacks.items():
                async with http.post(url, data=body) as resp:
                    assert resp.status == 401, (what, resp.status, await resp.text())
            async with http.post(url, data=sealed()) as resp:  # the genuine one still opens
                assert resp.status == 200
        assert handled == [SIZE]
    finally:
        await runner.cleanup()
