"""The in-memory network behaves like the HTTP transport: errors, statuses, deadlines, copies."""

from __future__ import annotations

import asyncio
import time

import pytest
from swarmnode.gossip.errors import (
    AddressInUse,
    CodecError,
    PeerUnreachable,
    RemoteError,
    RequestTimeout,
    TransportError,
)
from swarmnode.gossip.link.inmemory import InMemoryNetwork
from swarmnode.gossip.link.transport import Arrival

pytestmark = pytest.mark.timeout(30)


async def echo(req: Arrival) -> bytes:
    body = req.body
    return b"echo:" + body


def net_with(handlers: dict, latency: float = 0.0) -> InMemoryNetwork:
    net = InMemoryNetwork(latency=latency)
    net.register("b:1", handlers)
    return net


async def test_request_reaches_the_handler_and_returns_its_answer() -> None:
    net = net_with({"echo": echo})
    answer = await net.transport("a:1").request("b:1", "echo", b"hi", timeout=1.0)
    assert answer == b"echo:hi"
    assert net.stats["delivered"] == 1


async def test_bodies_are_copied_both_ways() -> None:
    seen: list[bytes] = []
    reply = bytearray(b"reply")

    async def keep(req: Arrival) -> bytes:
        body = req.body
        seen.append(body)
        return reply

    net = net_with({"keep": keep})
    sent = bytearray(b"request")
    answer = await net.transport("a:1").request("b:1", "keep", sent, timeout=1.0)
    sent[:] = b"XXXXXXX"
    reply[:] = b"YYYYY"
    assert seen == [b"request"] and type(seen[0]) is bytes
    assert answer == b"reply" and type(answer) is bytes


async def test_unknown_and_unregistered_addresses_are_unreachable() -> None:
    net = net_with({"echo": echo})
    t = net.transport("a:1")
    with pytest.raises(PeerUnreachable, match="nowhere:9"):
        await t.request("nowhere:9", "echo", b"", timeout=1.0)
    net.unregister("b:1")
    net.unregister("b:1")  # idempotent
    with pytest.raises(PeerUnreachable):
        await t.request("b:1", "echo", b"", timeout=1.0)


async def test_an_unknown_route_is_a_404() -> None:
    net = net_with({"echo": echo})
    with pytest.raises(RemoteError) as info:
        await net.transport("a:1").request("b:1", "nope", b"", timeout=1.0)
    assert info.value.status == 404


async def _raises(exc: Exception) -> RemoteError:
    async def handler(req: Arrival) -> bytes:
        raise exc

    net = net_with({"r": handler})
    with pytest.raises(RemoteError) as info:
        await net.transport("a:1").request("b:1", "r", b"", timeout=1.0)
    return info.value


async def test_handler_remote_error_keeps_its_status() -> None:
    err = await _raises(RemoteError("taken", 409))
    assert (err.status, str(err)) == (409, "taken")


async def test_handler_swarmnode_error_is_a_400_naming_it() -> None:
    err = await _raises(CodecError("field 'members' missing"))
    assert err.status == 400
    assert "CodecError" in str(err) and "members" in str(err)


async def test_handler_bug_is_a_500_and_logged(caplog: pytest.LogCaptureFixture) -> None:
    err = await _raises(ZeroDivisionError("boom"))
    assert err.status == 500
    assert "boom" not in str(err)  # internals stay on the server side, in its log
    assert "boom" in caplog.text


async def test_a_handler_answering_non_bytes_is_a_500() -> None:
    async def bad(req: Arrival) -> bytes:
        return {"not": "bytes"}  # type: ignore[return-value]

    net = net_with({"bad": bad})
    with pytest.raises(RemoteError) as info:
        await net.transport("a:1").request("b:1", "bad", b"", timeout=1.0)
    assert info.value.status == 500


async def test_the_deadline_is_enforced_and_the_handler_cancelled() -> None:
    cancelled = asyncio.Event()

    async def hang(req: Arrival) -> bytes:
        try:
            await asyncio.Event().wait()
        finally:
            cancelled.set()
        return b""

    net = net_with({"hang": hang})
    start = time.monotonic()
    with pytest.raises(RequestTimeout, match=r"0\.1 s"):
        await net.transport("a:1").request("b:1", "hang", b"", timeout=0.1)
    assert time.monotonic() - start < 5.0
    assert cancelled.is_set()
    with pytest.raises(RequestTimeout):
        await net.transport("a:1").request("b:1", "hang", b"", timeout=0.0)


async def test_latency_applies_each_way_and_counts_against_the_deadline() -> None:
    net = net_with({"echo": echo}, latency=0.05)
    t = net.transport("a:1")
    start = time.monotonic()
    assert await t.request("b:1", "echo", b"x", timeout=5.0) == b"echo:x"
    assert time.monotonic() - start >= 0.1
    with pytest.raises(RequestTimeout):
        await t.request("b:1", "echo", b"x", timeout=0.06)


async def test_a_frozen_peer_hangs_until_the_deadline_or_thaw() -> None:
    net = net_with({"echo": echo})
    net.register("a:1", {"echo": echo})
    net.freeze("b:1")
    caller = net.transport("a:1")
    with pytest.raises(RequestTimeout):
        await caller.request("b:1", "echo", b"1", timeout=0.05)
    with pytest.raises(RequestTimeout):  # a frozen peer's own requests hang too
        await net.transport("b:1").request("a:1", "echo", b"2", timeout=0.05)
    pending = asyncio.create_task(caller.request("b:1", "echo", b"3", timeout=10.0))
    await asyncio.sleep(0)  # let it reach the frozen peer
    assert not pending.done()
    net.thaw("b:1")
    assert await pending == b"echo:3"


def test_an_address_serves_one_peer_only() -> None:
    net = net_with({"echo": echo})
    with pytest.raises(AddressInUse):
        net.register("b:1", {"echo": echo})
    assert net.is_registered("b:1")


def test_negative_latency_is_rejected() -> None:
    with pytest.raises(ValueError, match="latency"):
        InMemoryNetwork(latency=-1.0)


async def test_a_closed_transport_refuses_requests() -> None:
    net = net_with({"echo": echo})
    t = net.transport("a:1")
    await t.close()
    await t.close()
    with pytest.raises(TransportError, match="closed"):
        await t.request("b:1", "echo", b"", timeout=1.0)


async def test_hundreds_of_concurrent_requests_each_get_their_own_answer() -> None:
    net = InMemoryNetwork()
    for i in range(256):
        net.register(f"p:{i}", {"echo": echo})
    t = net.transport("client:0")
    answers = await asyncio.gather(
        *(t.request(f"p:{i}", "echo", str(i).encode(), timeout=5.0) for i in range(256))
    )
    assert answers == [f"echo:{i}".encode() for i in range(256)]
