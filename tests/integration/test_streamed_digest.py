"""Over real HTTP, a large envelope is hashed while it arrives, on both sides (issue 10: signing
cost): the request on the server, the answer on the client. `open_request` must get the
digest the transport's tap computed, not hash the body again."""

from __future__ import annotations

import pytest
from swarmnode.gossip.auth import SIGNED_ROUTES, Signer
from swarmnode.gossip.auth_transport import AuthTransport, auth_handlers
from swarmnode.gossip.peer_key import PeerKey
from swarmnode.node.net.app import build_app, serve
from swarmnode.node.net.transport import HttpTransport

pytestmark = pytest.mark.timeout(60)

SIZE = 3 << 20  # past INLINE_BYTES: the bulk path


async def test_both_sides_open_with_the_streamed_digest(monkeypatch) -> None:
    a, b = PeerKey.generate(), PeerKey.generate()
    server = Signer("s", key=b, keys={a.peer_id: a.public}.get, signed_routes=SIGNED_ROUTES)
    client = Signer("s", key=a, signed_routes=SIGNED_ROUTES)
    given: list[bool] = []
    real = Signer.open_request

    def spy(self, route, data, *, reply_to=b"", digest=None):  # type: ignore[no-untyped-def]
        given.append(digest is not None)
        return real(self, route, data, reply_to=reply_to, digest=digest)

    monkeypatch.setattr(Signer, "open_request", spy)

    async def echo(body: bytes) -> bytes:
        return bytes(body)

    app = build_app(auth_handlers({"pushpull": echo}, server), tap=server.tap)
    runner, port = await serve(app, "127.0.0.1", 0)
    server.name = f"127.0.0.1:{port}"
    transport = AuthTransport(HttpTransport(), client)
    try:
        body = bytes(range(256)) * (SIZE // 256)
        answer = await transport.request(server.name, "pushpull", body, timeout=30)
        assert bytes(answer) == body
        assert given == [True, True]  # the server's request, then the client's answer
    finally:
        await transport.close()
        await runner.cleanup()
