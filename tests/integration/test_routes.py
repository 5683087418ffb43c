"""Bad input on every route of a real peer: a 4xx answer, one log line, and nothing else changes.

Each test runs one in-process `Node` on 127.0.0.1 with its training thread stopped, so the model
is frozen: any change to it after a request is that request's doing. Requests go over real TCP to
the node's own aiohttp server (the same `serve()` the process uses; aiohttp's TestServer would
start a second server on the same app). After every bad request the test checks:

- the status code (4xx, and the specific one where it is defined);
- exactly one WARNING line naming the route, and no ERROR line or traceback anywhere;
- the model is bit-for-bit what it was and finite, and the peer still serves a valid pull.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable

import aiohttp
import numpy as np
import pytest
from swarmnode.fault.hostile.insider import admit
from swarmnode.gossip.wire import frames as wire
from swarmnode.gossip.wire.control import decode_control, encode_control
from swarmnode.node.peer.node import Node
from swarmnode.node.settings import PeerConfig

from tests.integration.member_client import MemberClient
from tests.integration.peers import operator_pub, signed_admin
from tests.integration.route_bodies import (
    ADMIN_ROUTES,
    PUSHER_KEY,
    TESTER,
    cases_for,
    entry,
    valid_body,
)
from tests.waiting import eventually

pytestmark = pytest.mark.timeout(90)


CAP_MB = 2  # the test peer's HTTP body cap: anything past it must be refused with 413
OVERSIZE = 3 << 20  # over the cap
CONTROL_ROUTES = ("gossip", "join", "leave", "params", *ADMIN_ROUTES)


@pytest.fixture
async def node(tmp_path) -> AsyncIterator[Node]:
    cfg = PeerConfig(
        model="mlp:8",
        steps=0,
        listen="127.0.0.1:0",
        eval_every=10**6,
        max_body_mb=CAP_MB,
        enable_admin=True,
        admin_key=operator_pub(tmp_path),
    )
    peer = await Node.create(cfg)
    try:
        # Freeze the model: with the training thread stopped, mixes are dropped and nothing else
        # writes the parameters, so "unchanged" can be checked exactly.
        assert await asyncio.to_thread(peer.worker.stop, 30.0)
        admit(peer, MEMBER)  # the pulls and pushes here test body handling, not who may
        yield peer
    finally:
        await peer.close()


@pytest.fixture
async def http() -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=30)) as session:
        yield session


# --- requests and checks -------------------------------------------------------------------


MEMBER = MemberClient(key=PUSHER_KEY)


def signed(route: str, body: object, node: Node) -> object:
    """Admin bodies are signed by the operator, model routes' by a member, so what is tested is
    the route's own parsing (unsigned ones never get that far: test_admin_auth.py,
    test_hostile_exchange.py)."""
    if route in ADMIN_ROUTES and isinstance(body, bytes):
        return signed_admin(route, body, node.addr)
    if isinstance(body, bytes):
        return MEMBER.seal(node.addr, route, body)
    return body


async def post(http: aiohttp.ClientSession, node: Node, route: str, body: object) -> int:
    async with http.post(f"http://{node.addr}/v1/{route}", data=signed(route, body, node)) as resp:
        await resp.read()
        return resp.status


async def raw_request(node: Node, head: str, body: bytes = b"") -> int:
    """Send bytes as they are (a lying Content-Length, broken chunking); the status answered."""
    host, port = node.addr.rsplit(":", 1)
    reader, writer = await asyncio.open_connection(host, int(port))
    try:
        writer.write(head.replace("\n", "\r\n").encode() + body)
        await writer.drain()
        status_line = await asyncio.wait_for(reader.readline(), 30)
        return int(status_line.split()[1])
    finally:
        writer.close()


async def chunked(total: int, piece: int = 64 * 1024) -> AsyncIterator[bytes]:
    for start in range(0, total, piece):
        yield b"x" * min(piece, total - start)


def route_lines(
    caplog: pytest.LogCaptureFixture, needle: str, level: int = logging.WARNING
) -> list[str]:
    return [
        r.getMessage() for r in caplog.records if r.levelno == level and needle in r.getMessage()
    ]


def assert_logged_once(
    caplog: pytest.LogCaptureFixture, needle: str, what: str, level: int = logging.WARNING
) -> None:
    lines = route_lines(caplog, needle, level)
    assert len(lines) == 1, f"{what}: expected one line naming {needle}, got {lines}"
    if level < logging.WARNING:
        assert not route_lines(caplog, needle), f"{what}: logged as a warning"
    assert "\n" not in lines[0], f"{what}: the log line spans lines: {lines[0]!r}"
    bad = [r for r in caplog.records if r.levelno >= logging.ERROR or r.exc_info]
    assert not bad, f"{what}: error/traceback logged: {[r.getMessage() for r in bad]}"


async def assert_untouched(http: aiohttp.ClientSession, node: Node, frozen: np.ndarray) -> None:
    now = node.params_host()
    assert np.isfinite(now).all()
    np.testing.assert_array_equal(now, frozen)
    pull = signed("params", valid_body("params", 0), node)
    async with http.post(f"http://{node.addr}/v1/params", data=pull) as resp:
        assert resp.status == 200
        _, served = wire.decode_params(await resp.read(), expected_size=frozen.size)
    np.testing.assert_array_equal(served, frozen)


def admin_state(node: Node) -> tuple[object, ...]:
    return (
        node.faults.config.to_spec(),
        node.byzantine.kind,
        node.worker.pacer.slowdown,
    )


async def check_case(
    http: aiohttp.ClientSession,
    node: Node,
    caplog: pytest.LogCaptureFixture,
    what: str,
    needle: str,
    expected: int | tuple[int, ...],
    send: Callable[[], object],
    level: int = logging.WARNING,
) -> None:
    frozen, admin_before = node.params_host().copy(), admin_state(node)
    caplog.clear()
    status = await send()  # type: ignore[misc]
    allowed = (expected,) if isinstance(expected, int) else expected
    assert status in allowed, f"{what}: answered {status}, expected {allowed}"
    assert_logged_once(caplog, needle, what, level)
    assert admin_state(node) == admin_before, f"{what} changed the admin state"
    await assert_untouched(http, node, frozen)


# --- the tests -----------------------------------------------------------------------------


@pytest.mark.parametrize("route", [*CONTROL_ROUTES, "pushpull"])
async def test_malformed_bodies_are_refused_and_change_nothing(route, node, http, caplog):
    caplog.set_level(logging.INFO)
    size = node.store.size
    for case in cases_for(route, size, node.peer_id):
        what = f"POST /v1/{route} with {case.name}"
        send = lambda body=case.body: post(http, node, route, body)  # noqa: E731
        await check_case(http, node, caplog, what, f"/v1/{route}", case.status, send)

    # The route itself still works after all that.
    frozen = node.params_host().copy()
    body = signed(route, valid_body(route, size), node)
    async with http.post(f"http://{node.addr}/v1/{route}", data=body) as resp:
        assert resp.status == 200, await resp.text()
        answer = await resp.read()
    if route == "pushpull":  # a valid push is answered; training has ended, so it is dropped:
        await node.exchanger.settle()  # bounded and mixed while the answer was sent
        await node.store.settled()  # the model keeps its last evaluation (issue 12)
        np.testing.assert_array_equal(node.params_host(), frozen)
        assert node.worker.mixes_dropped >= 1
        _, theirs = wire.decode_params(answer, expected_size=size)
        np.testing.assert_array_equal(theirs, frozen)  # the answer is the model before the mix
    elif route != "params":
        assert decode_control(answer)["type"].endswith(("ack", "ok"))


@pytest.mark.parametrize("route", [*CONTROL_ROUTES, "pushpull"])
async def test_oversized_bodies_are_refused_413(route, node, http, caplog):
    caplog.set_level(logging.INFO)
    needle = f"/v1/{route}"
    lying = f"POST {needle} HTTP/1.1\nHost: x\nContent-Length: {OVERSIZE}\nConnection: close\n\n"

    await check_case(
        http,
        node,
        caplog,
        f"{needle}: Content-Length past the cap, refused before the body is read",
        needle,
        413,
        lambda: raw_request(node, lying, b"x" * 100),
    )
    await check_case(
        http,
        node,
        caplog,
        f"{needle}: chunked body past the cap",
        needle,
        413,
        lambda: post(http, node, route, chunked(OVERSIZE)),
    )


async def test_a_join_takes_the_intakes_path_and_is_refused_like_any_route(node, http, caplog):
    """A join's entry goes through the membership intake a digest's entries go through: an
    unsigned record is malformed (400), a record whose signature fails is forged (403, counted
    with the forged digests); each refusal is the one line every route's refusal is, and nobody
    joins. Its oversized and malformed bodies are the parametrized tests above."""
    caplog.set_level(logging.INFO)
    good = entry()
    forged = [good[0], bytes(64), *good[2:]]  # TESTER's record under a signature that fails
    plain = [TESTER.peer_id, "127.0.0.1:9", 0, 1, "alive", 0.0, {}]  # no signature at all
    intake = node.membership.intake
    start = intake.forged_digests
    for what, member, status in [("an unsigned record", plain, 400), ("a forged one", forged, 403)]:
        forged_before = intake.forged_digests
        body = encode_control("join", member=member)
        send = lambda body=body: post(http, node, "join", body)  # noqa: E731
        await check_case(http, node, caplog, f"join with {what}", "/v1/join", status, send)
        (line,) = route_lines(caplog, "/v1/join")
        assert line.startswith("rejected /v1/join from ") and f": {status} " in line, line
        assert not node.membership.table.knows(TESTER.peer_id)
        assert intake.forged_digests == forged_before + (status == 403)
    # the same forged record in a gossip digest: dropped by the same merge, and counted alike
    gossip = encode_control("gossip", sender="t", members=[forged])
    assert await post(http, node, "gossip", gossip) == 200
    assert intake.forged_digests == start + 2 and not node.membership.table.knows(TESTER.peer_id)


async def test_admin_body_split_across_packets_is_read_whole(node, caplog):
    """A body that arrives in two TCP segments must not be cut at the first (it used to be)."""
    body = signed_admin("admin/slowdown", encode_control("slowdown", factor=3.0), node.addr)
    head = f"POST /v1/admin/slowdown HTTP/1.1\r\nHost: x\r\nContent-Length: {len(body)}\r\n\r\n"
    host, port = node.addr.rsplit(":", 1)
    reader, writer = await asyncio.open_connection(host, int(port))
    try:
        writer.write(head.encode() + body[:4])
        await writer.drain()
        await asyncio.sleep(0.2)  # not waiting for state: forcing a second segment on the wire
        writer.write(body[4:])
        await writer.drain()
        status_line = await asyncio.wait_for(reader.readline(), 30)
    finally:
        writer.close()
    assert b" 200 " in status_line, status_line
    assert node.worker.pacer.slowdown == 3.0


@pytest.mark.parametrize(
    ("method", "path", "expected"),
    [
        ("POST", "/v1/no-such-route", 404),
        ("POST", "/v2/gossip", 404),
        ("GET", "/v1/no-such-route", (404, 405)),
        ("GET", "/v1/gossip", 405),
        ("PUT", "/v1/pushpull", 405),
        ("POST", "/v1/status", (404, 405)),
        ("POST", "/metrics", 405),
        ("DELETE", "/v1/admin/fault", 405),
        ("POST", "/", 405),  # GET / is the swarm page (test_web_page.py): read-only
        ("GET", "/web/no-such-file", 404),
        ("POST", "/v1/watch", (404, 405)),
    ],
)
async def test_unknown_routes_and_methods_are_refused_and_logged(
    method, path, expected, node, http, caplog
):
    caplog.set_level(logging.INFO)

    async def send() -> int:
        async with http.request(method, f"http://{node.addr}{path}", data=b"\xc1junk") as r:
            await r.read()
            return r.status

    # Both the router's line and the dispatcher's name the path followed by " from". Outside
    # /v1/ (a browser's GET /, a scanner) nothing a peer sent: INFO, not a warning.
    level = logging.WARNING if path.startswith("/v1/") else logging.INFO
    await check_case(http, node, caplog, f"{method} {path}", f"{path} from", expected, send, level)


@pytest.mark.parametrize(
    ("what", "head", "body"),
    [
        (
            "a bad chunk size",
            "POST /v1/gossip HTTP/1.1\nHost: x\nTransfer-Encoding: chunked\n\n",
            b"ZZ\r\nabc\r\n0\r\n\r\n",
        ),
        (
            "a negative Content-Length",
            "POST /v1/pushpull HTTP/1.1\nHost: x\nContent-Length: -1\n\n",
            b"abc",
        ),
    ],
    ids=["bad-chunk-size", "negative-content-length"],
)
async def test_malformed_http_framing_is_one_line(what, head, body, node, http, caplog):
    """aiohttp answers these 400 itself; the peer must log them as one line, not a traceback."""
    caplog.set_level(logging.INFO)
    await check_case(
        http,
        node,
        caplog,
        what,
        "malformed HTTP request",
        400,
        lambda: raw_request(node, head, body),
    )


async def test_body_cut_short_by_the_client_is_one_line(node, http, caplog):
    """The client promises 1000 bytes, sends 3 and hangs up: one line, no traceback."""
    caplog.set_level(logging.INFO)
    frozen = node.params_host().copy()
    head = "POST /v1/gossip HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\nabc"
    host, port = node.addr.rsplit(":", 1)
    _, writer = await asyncio.open_connection(host, int(port))
    writer.write(head.encode())
    await writer.drain()
    writer.close()
    await writer.wait_closed()

    # routine, INFO: a peer that leaves or dies with a request in flight does this
    await eventually(
        lambda: route_lines(caplog, "/v1/gossip", logging.INFO), 20, "the cut-short body's log"
    )
    assert_logged_once(caplog, "/v1/gossip", "body cut short", logging.INFO)
    await assert_untouched(http, node, frozen)


@pytest.mark.parametrize("path", ["/v1/status", "/metrics"])
async def test_get_routes_ignore_a_junk_body_and_query(path, node, http):
    url = f"http://{node.addr}{path}?version=99&x=%ff"
    async with http.get(url, data=b"\xc1" * 10_000) as resp:
        assert resp.status == 200
        text = await resp.text()
    assert node.peer_id in text
