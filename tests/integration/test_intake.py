"""Request intake (node/net/intake.py) on a real aiohttp server on 127.0.0.1: bodies are
delivered on time before they hold anything, then bulk requests take a slot.

The slow-body attack of issue 10 held every admission slot with bodies trickled at one byte per
2 s; these tests pin the properties that make it fail: a body that has not arrived holds no
slot, a slow body is cut off (408, connection closed), a delivered request over the limit gets
503, one remote address cannot take every slot, and the bytes of bodies in flight are budgeted.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator

import aiohttp
import pytest
from swarmnode.gossip.link.transport import Arrival
from swarmnode.node.net.intake import IntakeLimits

pytestmark = pytest.mark.timeout(60)

LOGGER = "swarmnode.node.net.app"


@pytest.fixture
async def http() -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=30)) as session:
        yield session


async def post(http: aiohttp.ClientSession, url: str, data: object) -> tuple[int, bytes]:
    async with http.post(url, data=data) as resp:
        return resp.status, await resp.read()


async def refused(http: aiohttp.ClientSession, url: str, data: bytes) -> bool:
    try:
        status, text = await post(http, url, data)
    except aiohttp.ClientError:
        return True
    return status == 503 and b"busy" in text


class Trickle:
    """A raw connection that sends a POST's headers and then its body one byte at a time."""

    def __init__(self, addr: str, route: str, length: int, every: float) -> None:
        self.addr, self.route, self.length, self.every = addr, route, length, every
        self.status: bytes = b""
        self.task: asyncio.Task[None] | None = None

    async def __aenter__(self) -> Trickle:
        host, port = self.addr.split(":")
        self.reader, self.writer = await asyncio.open_connection(host, int(port))
        head = (
            f"POST /v1/{self.route} HTTP/1.1\r\nHost: {self.addr}\r\n"
            f"Content-Type: application/octet-stream\r\nContent-Length: {self.length}\r\n\r\n"
        )
        self.writer.write(head.encode() + b"x")
        await self.writer.drain()
        self.task = asyncio.create_task(self._drip())
        return self

    async def _drip(self) -> None:
        try:
            for _ in range(self.length - 1):
                await asyncio.sleep(self.every)
                self.writer.write(b"x")
                await self.writer.drain()
        except (ConnectionError, RuntimeError):  # the server cut us off: the point
            pass

    async def answer(self, timeout: float) -> bytes:
        """The status line the server sends (b"" if it closed without one)."""
        return await asyncio.wait_for(self.reader.readline(), timeout)

    async def closed(self, timeout: float) -> bool:
        """Whether the server closed the connection (EOF after its answer)."""
        await asyncio.wait_for(self.reader.read(), timeout)
        return self.reader.at_eof()

    async def __aexit__(self, *exc: object) -> None:
        assert self.task is not None
        self.task.cancel()
        await asyncio.gather(self.task, return_exceptions=True)
        self.writer.close()


def held(started: asyncio.Event, release: asyncio.Event):  # type: ignore[no-untyped-def]
    async def handler(req: Arrival) -> bytes:
        started.set()
        await release.wait()
        return b"done"

    return handler


async def echo(req: Arrival) -> bytes:
    return bytes(req.body)


async def test_a_body_not_yet_delivered_holds_no_slot(start_server, http):
    addr = await start_server({"pushpull": echo}, admission={"pushpull": 1})
    async with Trickle(addr, "pushpull", 19_000, every=2.0):
        async with Trickle(addr, "pushpull", 19_000, every=2.0):
            # the one admission slot is free for a request that delivers its body
            for i in range(5):
                assert await post(http, f"http://{addr}/v1/pushpull", b"m%d" % i) == (
                    200,
                    b"m%d" % i,
                )


async def test_a_slow_body_is_cut_off_with_408_and_its_connection_closed(start_server, caplog):
    limits = IntakeLimits(grace_s=0.5, min_rate=1e6)
    addr = await start_server({"pushpull": echo}, admission={"pushpull": 1}, intake=limits)
    caplog.set_level(logging.INFO, LOGGER)
    t0 = time.monotonic()
    async with Trickle(addr, "pushpull", 19_000, every=0.1) as slow:
        assert (await slow.answer(10)).startswith(b"HTTP/1.1 408")
        assert await slow.closed(10)
    assert time.monotonic() - t0 < 5  # cut at ~grace + 19 KB / 1 MB/s, not after 30 min
    lines = [r.getMessage() for r in caplog.records if r.name == LOGGER]
    assert any("408" in line and "not delivered" in line for line in lines), lines
    # routine under attack: INFO, never WARNING/ERROR (a flood must not flood the log)
    assert not [r for r in caplog.records if r.name == LOGGER and r.levelno >= logging.WARNING]


async def test_a_delivered_request_over_the_limit_gets_503_and_the_slot_comes_back(
    start_server, http
):
    started, release = asyncio.Event(), asyncio.Event()
    addr = await start_server({"pushpull": held(started, release)}, admission={"pushpull": 1})
    first = asyncio.create_task(post(http, f"http://{addr}/v1/pushpull", b"a"))
    try:
        await asyncio.wait_for(started.wait(), 10)
        status, text = await post(http, f"http://{addr}/v1/pushpull", b"b")
        assert status == 503 and b"busy" in text
    finally:
        release.set()
    assert await first == (200, b"done")
    assert await post(http, f"http://{addr}/v1/pushpull", b"c") == (200, b"done")


async def test_one_remote_address_cannot_take_every_slot(start_server, http):
    started, release = asyncio.Event(), asyncio.Event()
    limits = IntakeLimits(per_remote=1)
    handler = held(started, release)
    addr = await start_server(
        {"pushpull": handler, "params": handler},
        admission={"pushpull": 4, "params": 4},
        intake=limits,
    )
    first = asyncio.create_task(post(http, f"http://{addr}/v1/pushpull", b"a"))
    try:
        await asyncio.wait_for(started.wait(), 10)
        assert (await post(http, f"http://{addr}/v1/params", b"b"))[0] == 503
        assert (await post(http, f"http://{addr}/v1/pushpull", b"c"))[0] == 503
    finally:
        release.set()
    assert await first == (200, b"done")


async def test_bytes_of_bodies_in_flight_are_budgeted(start_server, http):
    started, release = asyncio.Event(), asyncio.Event()
    addr = await start_server(
        {"pushpull": held(started, release), "echo": echo},
        intake=IntakeLimits(budget_bytes=3000),
    )
    first = asyncio.create_task(post(http, f"http://{addr}/v1/pushpull", bytes(2000)))
    try:
        await asyncio.wait_for(started.wait(), 10)
        # held bytes + these > budget: 503 and the connection is dropped (the client may see
        # only the drop, if it was still writing)
        assert await refused(http, f"http://{addr}/v1/echo", bytes(2000))
        assert await post(http, f"http://{addr}/v1/echo", bytes(500)) == (200, bytes(500))
    finally:
        release.set()
    assert await first == (200, b"done")
    # released with the request: the budget is whole again
    assert await post(http, f"http://{addr}/v1/echo", bytes(2900)) == (200, bytes(2900))
