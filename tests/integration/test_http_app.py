"""The peer's aiohttp app (node/net/app.py) served on 127.0.0.1, probed with plain aiohttp.

Bad requests must get a 4xx, exactly one WARNING line naming the route and the caller, no
ERROR/traceback, and leave the server answering the next request; a handler bug gets a 500 and
one logged traceback. Shutdown must leave no task behind.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable

import aiohttp
import pytest
from aiohttp import web
from swarmnode.gossip.errors import RemoteError
from swarmnode.gossip.link.transport import Arrival, Handler
from swarmnode.gossip.wire.control import decode_control, encode_control
from swarmnode.node.net.app import ListenError, build_app, serve

pytestmark = pytest.mark.timeout(60)

LOGGER = "swarmnode.node.net.app"
Start = Callable[..., Awaitable[str]]


@pytest.fixture
async def http() -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=30)) as session:
        yield session


async def echo(req: Arrival) -> bytes:
    return bytes(req.body)


async def control(req: Arrival) -> bytes:
    body = req.body
    """A control route: a msgpack message in, an answer out (CodecError on garbage)."""
    msg = decode_control(bytes(body), "ping")
    return encode_control("pong", n=msg["n"])


def warnings_from(caplog: pytest.LogCaptureFixture, logger: str = LOGGER) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == logger and r.levelno >= 30]


def assert_one_warning(caplog: pytest.LogCaptureFixture, *needles: str) -> None:
    lines = warnings_from(caplog)
    assert len(lines) == 1, lines
    assert all(n in lines[0] for n in needles), lines[0]
    assert "\n" not in lines[0]
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR or r.exc_info]


async def post(http: aiohttp.ClientSession, url: str, data: object) -> tuple[int, bytes]:
    async with http.post(url, data=data) as resp:
        return resp.status, await resp.read()


async def assert_still_serving(http: aiohttp.ClientSession, base: str) -> None:
    assert await post(http, f"{base}/v1/echo", b"still here") == (200, b"still here")


# --- routing -------------------------------------------------------------------------------


async def test_serve_on_port_zero_binds_a_real_port_and_answers(start_server, http):
    base = "http://" + await start_server({"echo": echo})
    assert not base.endswith(":0")
    assert await post(http, f"{base}/v1/echo", b"abc") == (200, b"abc")


async def test_handlers_added_after_binding_are_served(http):
    handlers: dict[str, Handler] = {}
    runner, port = await serve(build_app(handlers), "127.0.0.1", 0)
    try:
        handlers["late"] = echo  # the node fills its handlers once it knows its address
        assert await post(http, f"http://127.0.0.1:{port}/v1/late", b"x") == (200, b"x")
    finally:
        await runner.cleanup()


async def test_extra_get_routes_are_served(start_server, http):
    async def status(request: web.Request) -> web.Response:
        return web.json_response({"ok": True})

    base = "http://" + await start_server(
        {"echo": echo}, extra_routes=[web.get("/v1/status", status)]
    )
    async with http.get(f"{base}/v1/status") as resp:
        assert resp.status == 200 and await resp.json() == {"ok": True}
    await assert_still_serving(http, base)


@pytest.mark.parametrize(
    ("method", "path"),
    [("POST", "/v1/nope"), ("POST", "/elsewhere"), ("GET", "/v1/echo")],
)
async def test_unknown_route_or_method_is_4xx_with_one_line(
    start_server, http, caplog, method, path
):
    base = "http://" + await start_server({"echo": echo})
    caplog.set_level(logging.INFO)
    async with http.request(method, f"{base}{path}", data=b"x") as resp:
        assert resp.status in (404, 405)
        assert (resp.status == 404) == (method == "POST")
    if path.startswith("/v1/"):
        assert_one_warning(caplog, path, "127.0.0.1")
    else:  # not the protocol's (a browser, a scanner): one INFO line, nothing to act on
        assert warnings_from(caplog) == []
        (line,) = [r.getMessage() for r in caplog.records if r.name == LOGGER]
        assert path in line and "127.0.0.1" in line
    await assert_still_serving(http, base)


async def test_listening_on_a_taken_port_is_a_listen_error(start_server):
    base = "http://" + await start_server({"echo": echo})
    port = int(base.rsplit(":", 1)[1])
    with pytest.raises(ListenError, match=f"127.0.0.1:{port}"):
        await serve(build_app({}), "127.0.0.1", port)


# --- bad bodies ----------------------------------------------------------------------------


async def test_malformed_body_is_400_with_one_line(start_server, http, caplog):
    base = "http://" + await start_server({"echo": echo, "ping": control})
    caplog.set_level(logging.INFO)
    status, text = await post(http, f"{base}/v1/ping", b"\xc1 not msgpack")
    assert status == 400 and b"\n" not in text and text
    assert_one_warning(caplog, "/v1/ping", "127.0.0.1", "400")
    good = encode_control("ping", n=7)
    status, answer = await post(http, f"{base}/v1/ping", good)
    assert status == 200 and decode_control(answer, "pong")["n"] == 7


async def test_status_of_a_swarmnode_error_is_kept(start_server, http, caplog):
    class Refused(RemoteError):
        pass

    async def guarded(req: Arrival) -> bytes:
        raise Refused("bad signature", 401)

    base = "http://" + await start_server({"echo": echo, "guarded": guarded})
    caplog.set_level(logging.INFO)
    assert await post(http, f"{base}/v1/guarded", b"x") == (401, b"bad signature")
    assert_one_warning(caplog, "/v1/guarded", "401", "bad signature")


@pytest.mark.parametrize("route", ["small", "other"])
async def test_oversized_by_content_length_is_413_before_reading(start_server, http, caplog, route):
    seen: list[int] = []

    async def record(req: Arrival) -> bytes:
        body = req.body
        seen.append(len(body))
        return b"ok"

    caps = {"small": 1000, "*": 2000}
    base = "http://" + await start_server(
        {"echo": echo, "small": record, "other": record}, max_body_bytes=caps
    )
    caplog.set_level(logging.INFO)
    status, text = await post(http, f"{base}/v1/{route}", b"z" * 3000)
    assert status == 413 and b"limit" in text
    assert seen == []  # the handler never ran
    assert_one_warning(caplog, f"/v1/{route}", "413")
    assert await post(http, f"{base}/v1/{route}", b"z" * 900) == (200, b"ok")
    assert seen == [900]


async def test_oversized_chunked_body_is_413_as_it_streams(start_server, http, caplog):
    sent = 0

    async def endless() -> AsyncIterator[bytes]:
        nonlocal sent
        for _ in range(64):  # 64 MiB if nobody stops us; the cap is 1 MiB
            sent += 1 << 20
            yield b"c" * (1 << 20)

    base = "http://" + await start_server({"echo": echo}, max_body_bytes=1 << 20)
    caplog.set_level(logging.INFO)
    try:
        status, _ = await post(http, f"{base}/v1/echo", endless())
        assert status == 413
    except aiohttp.ClientConnectionError:
        pass  # the server may close on us while we still write: also a refusal
    assert sent < 64 << 20  # refused before the whole body went out
    assert_one_warning(caplog, "/v1/echo", "413")
    await assert_still_serving(http, base)


async def test_chunked_body_within_the_cap_arrives_whole(start_server, http):
    async def parts() -> AsyncIterator[bytes]:
        for i in range(5):
            yield bytes([i]) * 1000

    base = "http://" + await start_server({"echo": echo}, max_body_bytes=1 << 20)
    status, answer = await post(http, f"{base}/v1/echo", parts())
    assert status == 200 and answer == b"".join(bytes([i]) * 1000 for i in range(5))


async def test_body_cut_short_is_one_line_and_no_traceback(start_server, caplog):
    base = "http://" + await start_server({"echo": echo})
    host, port = base.removeprefix("http://").split(":")
    caplog.set_level(logging.INFO)
    logged = asyncio.Event()
    signal = _OnWarning(logged, logging.INFO)
    logging.getLogger(LOGGER).addHandler(signal)
    try:
        _, writer = await asyncio.open_connection(host, int(port))
        writer.write(b"POST /v1/echo HTTP/1.1\r\nHost: x\r\nContent-Length: 100000\r\n\r\nonly")
        await writer.drain()
        writer.close()  # hang up mid-body
        await writer.wait_closed()
        await asyncio.wait_for(logged.wait(), 10)  # the server noticed
    finally:
        logging.getLogger(LOGGER).removeHandler(signal)
    # one INFO line (a peer that leaves or dies with a request in flight), no warning
    lines = [r for r in caplog.records if r.name == LOGGER and "/v1/echo" in r.getMessage()]
    assert len(lines) == 1 and lines[0].levelno == logging.INFO, [r.getMessage() for r in lines]
    assert "connection lost" in lines[0].getMessage() and "127.0.0.1" in lines[0].getMessage()
    assert not [r for r in caplog.records if r.exc_info]


class _OnWarning(logging.Handler):
    """Sets an event on the first WARNING (or `level`): the server logs on the loop's thread."""

    def __init__(self, event: asyncio.Event, level: int = logging.WARNING) -> None:
        super().__init__(level)
        self.event = event

    def emit(self, record: logging.LogRecord) -> None:
        self.event.set()


async def test_handler_bug_is_500_with_a_logged_traceback_and_serving_goes_on(
    start_server, http, caplog
):
    async def buggy(req: Arrival) -> bytes:
        raise KeyError("oops")

    base = "http://" + await start_server({"echo": echo, "buggy": buggy})
    caplog.set_level(logging.INFO)
    assert await post(http, f"{base}/v1/buggy", b"x") == (500, b"internal error")
    errors = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert len(errors) == 1 and errors[0].exc_info and "/v1/buggy" in errors[0].getMessage()
    await assert_still_serving(http, base)


async def test_rejections_go_to_the_given_logger(start_server, http, caplog):
    base = "http://" + await start_server({"echo": echo}, logger=logging.getLogger("peer.abc"))
    caplog.set_level(logging.INFO)
    assert (await post(http, f"{base}/v1/nope", b"x"))[0] == 404
    assert len(warnings_from(caplog, "peer.abc")) == 1
    assert warnings_from(caplog, LOGGER) == []


# --- bulk bodies and shutdown --------------------------------------------------------------


async def test_large_bodies_reach_handlers_whole_and_answers_stream_back(start_server, http):
    size = 5 << 20
    got: list[object] = []

    async def keep(req: Arrival) -> bytes:
        body = req.body
        got.append(body)
        return body  # a memoryview: answered through the sliced path

    base = "http://" + await start_server({"keep": keep})
    payload = bytes(range(256)) * (size // 256)
    status, answer = await post(http, f"{base}/v1/keep", payload)
    assert status == 200 and answer == payload
    assert len(got) == 1 and bytes(got[0]) == payload  # bytes-like, maybe not `bytes`


async def test_cleanup_cancels_stuck_handlers_and_leaves_no_tasks(http):
    entered = asyncio.Event()

    async def stuck(req: Arrival) -> bytes:
        entered.set()
        await asyncio.Event().wait()
        return b""

    before = asyncio.all_tasks()
    runner, port = await serve(build_app({"stuck": stuck}), "127.0.0.1", 0, shutdown_timeout=0.2)
    call = asyncio.create_task(post(http, f"http://127.0.0.1:{port}/v1/stuck", b"x"))
    await asyncio.wait_for(entered.wait(), 10)
    t0 = time.monotonic()
    await runner.cleanup()
    assert time.monotonic() - t0 < 5
    with pytest.raises(aiohttp.ClientError):  # the caller sees the connection go, not a hang
        await asyncio.wait_for(call, 10)
    assert asyncio.all_tasks() - before == set()
