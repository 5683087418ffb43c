"""A test client that pulls and pushes as a swarm member: its requests on the model routes are
signed by its own peer key (gossip/auth/signer.py), as a peer's are. `admit(node, client)` puts it
in an in-process `Node`'s member table view (swarmnode.fault.hostile.insider)."""

from __future__ import annotations

from typing import Any

import aiohttp
from swarmnode.gossip.auth.peer_key import PeerKey
from swarmnode.gossip.auth.signer import SIGNED_ROUTES, Signer, nonce_of


class MemberClient:
    def __init__(self, secret: str | None = None, key: PeerKey | None = None) -> None:
        self.key = key or PeerKey.generate()
        self.peer_id = self.key.peer_id
        self.signer = Signer(secret, key=self.key, signed_routes=SIGNED_ROUTES, name="127.0.0.1:9")

    def seal(self, addr: str, route: str, body: Any) -> bytes:
        """`body` as this member sends it to `route` at `addr` (a request for that peer only)."""
        return bytes(self.signer.seal(route, body, to=addr)) if self.signer.wraps(route) else body

    async def post(
        self, http: aiohttp.ClientSession, addr: str, route: str, body: Any
    ) -> tuple[int, bytes]:
        """(status, answer body: opened when the swarm has a secret and it was a 200)."""
        sealed = self.seal(addr, route, body)
        async with http.post(f"http://{addr}/v1/{route}", data=sealed) as resp:
            data = await resp.read()
            if resp.status == 200 and self.signer.has_secret and self.signer.wraps(route):
                data = bytes(self.signer.open(route, data, reply_to=nonce_of(sealed)))
            return resp.status, data
