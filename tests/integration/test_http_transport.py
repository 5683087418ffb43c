"""`HttpTransport` against real aiohttp servers (node/net/app.py) on 127.0.0.1.

Every server binds port 0 and is cleaned up by the fixture; waits are bounded by the transport's
own deadlines, never by sleeps.
"""

from __future__ import annotations

import asyncio
import socket
import time
from collections.abc import AsyncIterator, Awaitable, Callable

import numpy as np
import pytest
from swarmnode.gossip.errors import CodecError, PeerUnreachable, RemoteError, RequestTimeout
from swarmnode.gossip.link.transport import Arrival
from swarmnode.node.net.app import build_app, serve
from swarmnode.node.net.transport import INLINE_BYTES, HttpTransport

pytestmark = pytest.mark.timeout(60)

Start = Callable[..., Awaitable[str]]


@pytest.fixture
async def transport() -> AsyncIterator[HttpTransport]:
    t = HttpTransport()
    yield t
    await t.close()


async def echo(req: Arrival) -> bytes:
    return req.body


def free_port() -> int:
    """A port with nothing listening on it (bound, then released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# --- round trips ---------------------------------------------------------------------------


@pytest.mark.parametrize("size", [0, 1, 1000, INLINE_BYTES, INLINE_BYTES + 1, 6 << 20])
async def test_round_trip_is_byte_exact(start_server, transport, size):
    addr = await start_server({"echo": echo})
    body = np.random.default_rng(size).integers(0, 256, size, dtype=np.uint8).tobytes()
    answer = await transport.request(addr, "echo", body, timeout=30)
    assert bytes(answer) == body
    # Small answers are plain bytes; large ones one buffer the caller may write to.
    assert isinstance(answer, bytes) if size <= INLINE_BYTES else not memoryview(answer).readonly


async def test_any_contiguous_buffer_is_sent_as_its_bytes(start_server, transport):
    seen: list[bytes] = []

    async def record(req: Arrival) -> bytes:
        body = req.body
        seen.append(bytes(body))
        return b"ok"

    addr = await start_server({"record": record})
    params = np.arange(3 << 18, dtype=np.float32)  # 3 MiB of float32: a memoryview of items
    for body in (params, memoryview(params), bytearray(params.tobytes())):
        assert await transport.request(addr, "record", body, timeout=30) == b"ok"
    assert seen == [params.tobytes()] * 3


async def test_large_answer_from_a_float_array_arrives_whole(start_server, transport):
    model = np.linspace(-1, 1, 2_000_000, dtype=np.float32)  # 8 MB, a memoryview of floats

    async def pull(req: Arrival) -> memoryview:
        return memoryview(model)

    addr = await start_server({"params": pull})
    answer = await transport.request(addr, "params", b"", timeout=30)
    np.testing.assert_array_equal(np.frombuffer(answer, dtype=np.float32), model)


async def test_parallel_requests_are_served_concurrently(start_server, transport):
    n = 5
    arrived = 0
    all_in = asyncio.Event()

    async def gather_then_echo(req: Arrival) -> bytes:
        body = req.body
        # Answers only once all n requests are inside handlers: proves they run concurrently.
        nonlocal arrived
        arrived += 1
        if arrived == n:
            all_in.set()
        await all_in.wait()
        return body

    addr = await start_server({"echo": gather_then_echo})
    bodies = [bytes([i]) * (i * 300_000 + 1) for i in range(n)]
    answers = await asyncio.gather(
        *(transport.request(addr, "echo", b, timeout=30) for b in bodies)
    )
    assert [bytes(a) for a in answers] == bodies


# --- failures ------------------------------------------------------------------------------


async def test_nothing_listening_is_unreachable(transport):
    addr = f"127.0.0.1:{free_port()}"
    t0 = time.monotonic()
    with pytest.raises(PeerUnreachable) as info:
        await transport.request(addr, "gossip", b"x", timeout=10)
    assert addr in str(info.value) and "gossip" in str(info.value)
    assert time.monotonic() - t0 < 5  # refused at once, not a timeout


async def test_handler_that_never_answers_times_out_within_the_deadline(start_server, transport):
    entered = asyncio.Event()
    release = asyncio.Event()

    async def stuck(req: Arrival) -> bytes:
        entered.set()
        await release.wait()
        return b"late"

    addr = await start_server({"stuck": stuck})
    deadline = 0.5
    t0 = time.monotonic()
    with pytest.raises(RequestTimeout) as info:
        await transport.request(addr, "stuck", b"x" * (2 << 20), timeout=deadline)
    elapsed = time.monotonic() - t0
    assert entered.is_set()  # the request reached the handler: it is the answer that is late
    assert deadline * 0.9 <= elapsed < deadline + 2.0  # slack for a loaded CI box
    assert addr in str(info.value)
    release.set()
    assert await transport.request(addr, "stuck", b"x", timeout=10) == b"late"


async def test_peer_that_accepts_but_never_speaks_times_out():
    silent = socket.create_server(("127.0.0.1", 0))  # accepts (backlog) but never answers
    addr = f"127.0.0.1:{silent.getsockname()[1]}"
    t = HttpTransport()
    try:
        t0 = time.monotonic()
        with pytest.raises(RequestTimeout):
            await t.request(addr, "gossip", b"x", timeout=0.3)
        assert time.monotonic() - t0 < 2.3
    finally:
        await t.close()
        silent.close()


@pytest.mark.parametrize(
    ("exc", "status", "text"),
    [
        (RemoteError("too busy for you", 503), 503, "too busy for you"),
        (RemoteError("no such thing", 404), 404, "no such thing"),
        (CodecError("not msgpack\nat byte 3"), 400, "not msgpack at byte 3"),
        (ValueError("secret internals"), 500, "internal error"),
    ],
)
async def test_error_answers_become_remote_errors(start_server, transport, exc, status, text):
    async def failing(req: Arrival) -> bytes:
        raise exc

    addr = await start_server({"fail": failing})
    with pytest.raises(RemoteError) as info:
        await transport.request(addr, "fail", b"x", timeout=10)
    assert info.value.status == status
    assert text in str(info.value) and "\n" not in str(info.value)
    assert "secret internals" not in str(info.value)  # a bug's details stay in the log


async def test_error_text_read_from_a_peer_is_capped(start_server, transport):
    async def chatty(req: Arrival) -> bytes:
        raise RemoteError("x" * 100_000, 429)

    addr = await start_server({"chatty": chatty})
    with pytest.raises(RemoteError) as info:
        await transport.request(addr, "chatty", b"", timeout=10)
    assert info.value.status == 429
    assert len(str(info.value)) < 1000


async def test_answer_over_the_cap_is_refused_without_reading_it(start_server):
    async def big(req: Arrival) -> bytes:
        return b"y" * (4 << 20)

    addr = await start_server({"big": big})
    t = HttpTransport(max_response_bytes=1 << 20)
    try:
        with pytest.raises(RemoteError) as info:
            await t.request(addr, "big", b"", timeout=10)
        assert info.value.status == 413 and "limit" in str(info.value)
    finally:
        await t.close()


async def test_oversized_request_is_refused_413_and_the_connection_recovers(
    start_server, transport
):
    addr = await start_server({"echo": echo}, max_body_bytes=1 << 20)
    with pytest.raises(RemoteError) as info:
        await transport.request(addr, "echo", b"z" * (8 << 20), timeout=20)
    assert info.value.status == 413
    assert await transport.request(addr, "echo", b"next", timeout=10) == b"next"


async def test_closed_transport_refuses_and_close_is_idempotent(start_server):
    addr = await start_server({"echo": echo})
    t = HttpTransport()
    assert await t.request(addr, "echo", b"a", timeout=10) == b"a"
    await t.close()
    await t.close()
    with pytest.raises(PeerUnreachable):
        await t.request(addr, "echo", b"a", timeout=10)


async def test_server_gone_mid_pool_is_unreachable_not_a_hang(transport):
    runner, port = await serve(build_app({"echo": echo}), "127.0.0.1", 0)
    addr = f"127.0.0.1:{port}"
    assert await transport.request(addr, "echo", b"a", timeout=10) == b"a"  # pooled connection
    await runner.cleanup()
    with pytest.raises(PeerUnreachable):
        await transport.request(addr, "echo", b"a", timeout=10)


async def scripted_peer(reply: bytes) -> tuple[asyncio.Server, str]:
    """A TCP peer that reads the request head, writes `reply` verbatim and hangs up."""

    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        writer.write(reply)
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(answer, "127.0.0.1", 0)
    return server, f"127.0.0.1:{server.sockets[0].getsockname()[1]}"


async def test_peer_speaking_no_http_is_a_remote_error(transport):
    server, addr = await scripted_peer(b"SSH-2.0-OpenSSH\r\n\r\n")
    try:
        with pytest.raises(RemoteError) as info:
            await transport.request(addr, "gossip", b"x", timeout=10)
        assert info.value.status == 502 and addr in str(info.value)
    finally:
        server.close()
        await server.wait_closed()


async def test_answer_cut_short_is_unreachable_not_a_hang(transport):
    head = b"HTTP/1.1 200 OK\r\nContent-Length: 10000000\r\n\r\n"
    server, addr = await scripted_peer(head + b"p" * (3 << 20))
    try:
        with pytest.raises(PeerUnreachable):
            await transport.request(addr, "params", b"x", timeout=10)
    finally:
        server.close()
        await server.wait_closed()
