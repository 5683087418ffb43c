"""Issue 10, items 3 and 7: only members pull or push a model, and only in their own name.

Three real peers (`Node`s, aiohttp on 127.0.0.1), in an open swarm and in one with a secret. The
attacker is a member (`mallory`: her own key, joined like any peer, so she holds the secret when
there is one) and a stranger. They speak the real protocol (envelopes sealed by
`gossip.auth.signer.Signer`, frames by `gossip.wire.frames`) and try what a declared `sender` allowed before:

- push as another member (`sender` = b's id, the envelope signed by mallory's key);
- the same with the envelope's signer id set to b's (her signature cannot be b's);
- a stranger's signed pull and push (no member key verifies them: 403);
- a pull or push with no member signature at all (401).

Every push carries a model at 1e4 everywhere: had one been mixed, the victim's parameters would
be far from its honest range. Each attempt must be refused with its status, and the model must stay
where training keeps it.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import aiohttp
import numpy as np
import pytest
from swarmnode.gossip.auth.peer_key import PeerKey
from swarmnode.gossip.auth.signer import SIGNED_ROUTES, Signer
from swarmnode.gossip.membership.service import Membership
from swarmnode.gossip.wire import frames as wire
from swarmnode.gossip.wire.control import encode_control
from swarmnode.node.net.transport import HttpTransport
from swarmnode.node.peer.node import Node

from tests.integration.inprocess import peer_config
from tests.integration.member_client import MemberClient
from tests.waiting import eventually

pytestmark = [pytest.mark.slow, pytest.mark.timeout(120)]

POISON = 1e4


@pytest.fixture(params=[None, "s3cret"], ids=["open", "secret"])
async def swarm(request) -> AsyncIterator[tuple[list[Node], MemberClient, str | None]]:
    secret = request.param
    a = await Node.create(peer_config(seed=0, secret=secret))
    nodes = [a]
    mallory = MemberClient(secret)
    transport = HttpTransport()
    member = Membership(
        mallory.peer_id, "127.0.0.1:9", _wrapped(transport, mallory), key=mallory.key
    )
    try:
        nodes.append(await Node.create(peer_config(seed=1, secret=secret, join=[a.addr])))
        await member.join([a.addr], timeout=10)  # mallory is a member like any other peer
        await member.start()  # and keeps her heartbeat going
        await eventually(lambda: a.membership.get(mallory.peer_id) is not None, 10, "mallory")
        await eventually(lambda: len(a.membership.live_peers()) == 2, 30, "a to see both")
        yield nodes, mallory, secret
    finally:
        await member.close()
        for node in reversed(nodes):
            await node.close()
        await transport.close()


def _wrapped(transport: HttpTransport, client: MemberClient):  # type: ignore[no-untyped-def]
    from swarmnode.gossip.auth.transport import AuthTransport

    return AuthTransport(transport, client.signer) if client.signer.has_secret else transport


def _poisoned_push(size: int, sender: str) -> bytes:
    return bytes(wire.encode_params(np.full(size, POISON, np.float32), sender=sender, step=1))


async def _post(http: aiohttp.ClientSession, addr: str, route: str, body: bytes) -> tuple:
    async with http.post(f"http://{addr}/v1/{route}", data=body) as resp:
        return resp.status, await resp.read()


async def test_a_member_cannot_push_or_pull_in_another_members_name(swarm) -> None:
    (a, b), mallory, secret = swarm
    size = a.store.size
    forger = Signer(secret, key=mallory.key, signed_routes=SIGNED_ROUTES, name="127.0.0.1:9")
    forger.key = _claiming(mallory.key, b.peer_id)  # puts b's id in the envelope, signs as mallory
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=30)) as http:
        as_b = _poisoned_push(size, b.peer_id)
        attempts = {
            "push declared as b, signed by mallory": (
                "pushpull", mallory.seal(a.addr, "pushpull", as_b), 403),
            "push signed in b's name by mallory's key": (
                "pushpull", bytes(forger.seal("pushpull", as_b, to=a.addr)), 401),
            "pull declared as b, signed by mallory": (
                "params", mallory.seal(a.addr, "params", encode_control("pull", sender=b.peer_id)),
                403),
        }  # fmt: skip
        for what, (route, body, expected) in attempts.items():
            status, text = await _post(http, a.addr, route, body)
            assert status == expected, f"{what}: {status} {text[:200]!r}"
        # her own pull, in her own name, is served: the refusals above are about the name
        status, _ = await mallory.post(
            http, a.addr, "params", encode_control("pull", sender=mallory.peer_id)
        )
        assert status == 200
    await a.exchanger.settle()
    await a.store.settled()
    assert np.abs(a.params_host()).max() < POISON / 10  # nothing of the poison was mixed


async def test_strangers_and_unsigned_requests_get_nothing(swarm) -> None:
    (a, _b), _mallory, secret = swarm
    stranger = MemberClient(secret)  # holds the secret (when there is one), never joined
    size = a.store.size
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=30)) as http:
        pull = encode_control("pull", sender=stranger.peer_id)
        push = _poisoned_push(size, stranger.peer_id)
        for route, body in (("params", pull), ("pushpull", push)):
            status, text = await stranger.post(http, a.addr, route, body)
            assert status == 403, f"stranger's {route}: {status} {text[:200]!r}"
            status, text = await _post(http, a.addr, route, body)  # no envelope at all
            assert status == 401, f"unsigned {route}: {status} {text[:200]!r}"
    await a.exchanger.settle()
    await a.store.settled()
    assert np.abs(a.params_host()).max() < POISON / 10


class _claiming:
    """A key that signs as `key` but names `peer_id` as the signer: a forged signer id."""

    def __init__(self, key: PeerKey, peer_id: str) -> None:
        self._key, self.peer_id = key, peer_id

    def sign(self, data: bytes) -> bytes:
        return self._key.sign(data)
