"""The swarm page of a real peer: `GET /` and its files, read-only; the live stream over real
HTTP from in-process `Node`s on 127.0.0.1; `swarmnode status --watch` as a real subprocess.

(The page itself, run by a browser against peer processes: test_web_browser.py.)
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
import sys
import time
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest
from swarmnode.fault.inject.spec import parse_fault_spec
from swarmnode.node.peer.node import Node

from tests.integration.inprocess import evaluated_swarm
from tests.integration.inprocess import peer_config as in_process_config
from tests.integration.peers import ENV, operator_pub
from tests.waiting import eventually, free_port

pytestmark = pytest.mark.timeout(90)


def peer_config(**kw: Any):
    return in_process_config(**{"eval_every": 20, **kw})


@pytest.fixture
async def swarm(tmp_path) -> AsyncIterator[list[Node]]:
    """Three peers that see each other alive and have each evaluated once; with the admin
    routes on, so that their faults can be set at runtime (the fault layer is on their path)."""
    admin = {"enable_admin": True, "admin_key": operator_pub(tmp_path)}
    async with evaluated_swarm(lambda **kw: peer_config(**admin, **kw)) as nodes:
        yield nodes


async def read_events(resp: aiohttp.ClientResponse) -> AsyncIterator[tuple[str, dict[str, Any]]]:
    """(event name, JSON data) of each Server-Sent Event of the stream."""
    name, data = "message", b""
    async for line in resp.content:
        line = line.rstrip(b"\n")
        if line.startswith(b"event: "):
            name = line[7:].decode()
        elif line.startswith(b"data: "):
            data = line[6:]
        elif not line and data:
            yield name, json.loads(data)
            name, data = "message", b""


async def test_the_page_and_its_files_are_served_and_nothing_can_be_changed(caplog):
    node = await Node.create(peer_config(name="solo"))
    try:
        caplog.set_level(logging.WARNING)
        caplog.clear()  # the start warns (open admission): only what the requests log counts
        async with aiohttp.ClientSession() as http:
            base = f"http://{node.addr}"
            async with http.get(base + "/") as r:
                page = await r.text()
                assert r.status == 200 and r.content_type == "text/html"
                assert "script-src 'self'" in r.headers["Content-Security-Policy"]
            assert "/web/app.js" in page and "/web/uPlot.iife.min.js" in page
            assert "http://" not in page and "https://" not in page  # nothing from elsewhere
            assert not [r for r in caplog.records if r.levelno >= logging.WARNING], "GET / warned"
            for name, kind in [("app.js", "text/javascript"), ("style.css", "text/css"),
                               ("uPlot.iife.min.js", "text/javascript"),
                               ("uPlot.min.css", "text/css")]:  # fmt: skip
                async with http.get(f"{base}/web/{name}") as r:
                    assert r.status == 200 and r.content_type == kind and await r.read(), name
            for path in ("/web/..%2Fwatch.py", "/web/index.html", "/web/vendor/uPlot.LICENSE"):
                async with http.get(base + path) as r:
                    assert r.status == 404, path
            # read-only: every route of the page answers GET only; admin is off without a key
            for method, path in [("POST", "/"), ("PUT", "/v1/watch"), ("POST", "/v1/watch/now"),
                                 ("DELETE", "/v1/figures"), ("POST", "/v1/admin/fault")]:  # fmt: skip
                async with http.request(method, base + path, data=b"x") as r:
                    assert r.status in (404, 405), (method, path, r.status)
            async with http.get(base + "/v1/figures") as r:
                mine = await r.json()
            assert mine["self"]["peer_id"] == node.peer_id and mine["events"] == []
    finally:
        await node.close()


async def test_the_stream_shows_every_peer_fresh_and_a_leaving_one(swarm):
    a, b, c = swarm
    async with aiohttp.ClientSession() as http, http.get(f"http://{a.addr}/v1/watch") as resp:
        assert resp.status == 200 and resp.content_type == "text/event-stream"
        stream = read_events(resp)
        name, hello = await anext(stream)
        assert name == "hello" and hello["self"] == a.peer_id
        rows = {r["peer_id"]: r for r in hello["members"]}
        assert rows.keys() == {a.peer_id, b.peer_id, c.peer_id}
        assert rows[a.peer_id]["state"] == "self"
        for n in (b, c):  # their own figures, fetched by a: fresh, a second old at most
            assert rows[n.peer_id]["source"] == "fresh" and rows[n.peer_id]["age_s"] < 2.0
            assert rows[n.peer_id]["name"] == n.name and rows[n.peer_id]["step"] > 0
        assert hello["swarm"]["live"] == 3 and hello["swarm"]["acc_best"] is not None

        t0 = time.monotonic()
        b.faults.set_config(parse_fault_spec("delay=1ms"))  # as POST /v1/admin/fault does
        await c.close()
        seen_left = False
        events: list[dict[str, Any]] = []
        async for name, frame in stream:
            assert name == "message" and frame["point"]["values"]
            state = {r["peer_id"]: r["state"] for r in frame["members"]}[c.peer_id]
            if state == "left":  # issue 34: a clean leave read `2 of 3 live`
                assert (frame["swarm"]["live"], frame["swarm"]["members"]) == (2, 2)
            seen_left = seen_left or state == "left"
            events += frame["events"]
            kinds = {(e["kind"], e["peer"], e["at"]) for e in events}
            # a's own view of c leaving; b's own event, fetched from b by a's watch
            wanted = {("leave", c.peer_id, a.peer_id), ("fault", b.peer_id, b.peer_id)}
            if seen_left and wanted <= kinds:
                break
            assert time.monotonic() - t0 < 15, f"not shown within 15 s: {seen_left}, {kinds}"
        fault = next(e for e in events if e["kind"] == "fault")
        assert fault["text"] == "faults: none -> delay=0.001s" and fault["name"] == "b"


async def test_closing_a_peer_ends_the_streams_it_serves():
    node = await Node.create(peer_config(name="solo"))
    closed = False
    try:
        async with aiohttp.ClientSession() as http, http.get(f"http://{node.addr}/v1/watch") as r:
            await anext(read_events(r))  # the hello: the stream is open
            t0 = time.monotonic()
            await node.close()
            closed = True
            took = time.monotonic() - t0
            assert await r.content.read() == b""  # the stream ended, not cut by a timeout
    finally:
        if not closed:
            await node.close()
    assert took < 3.0, f"close took {took:.1f} s with a viewer"


@pytest.mark.slow
async def test_cli_status_watch_redraws_with_each_figures_age(swarm):
    a, b, c = swarm
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "swarmnode", "status", "--peer", a.addr, "--watch",
        "--count", "2", "--interval", "0.5",
        env=ENV, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    out, err = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode == 0, err.decode()
    # not a terminal: the screens one after another, each from its headline on
    screens = re.split(r"\n(?=the swarm as )", out.decode().strip())
    assert len(screens) == 2, out.decode()
    for screen in screens:
        assert screen.startswith("the swarm as a (")
        rows = {ln.split()[0]: ln for ln in screen.splitlines() if ln.split()[:1]}
        assert rows[a.peer_id].rstrip().endswith("now")
        for n in (b, c):
            age = rows[n.peer_id].split()[-1]
            assert age.endswith("s") and float(age[:-1]) < 2.0, screen


def test_status_watch_fails_in_one_line(capsys):
    from swarmnode.node.cli.command import main

    assert main(["status", "--peer", f"127.0.0.1:{free_port()}", "--watch", "--timeout", "1"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "no answer from" in err[0], err
    assert main(["status", "--watch", "--count", "-1"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--count must be >= 0" in err[0], err


async def test_held_streams_from_one_address_do_not_deny_another(monkeypatch):
    """Issue 34, item 14: 32 streams held from 127.0.0.1 used to take every seat. Both
    addresses play outsiders (loopback is trusted and always seated otherwise)."""
    from swarmnode.node.web import access
    from swarmnode.node.web import watch as watch_mod

    monkeypatch.setattr(access, "TRUST_LOOPBACK", False)
    node = await Node.create(peer_config(name="solo", listen="0.0.0.0:0"))
    port = node.addr.rsplit(":", 1)[1]
    held: list[aiohttp.ClientResponse] = []
    sessions = [aiohttp.ClientSession(connector=aiohttp.TCPConnector(local_addr=(ip, 0),
                                                                     limit=0))
                for ip in ("127.0.0.1", "127.0.0.2")]  # fmt: skip
    try:
        one, other = sessions
        statuses = []
        for _ in range(watch_mod.MAX_VIEWERS):
            r = await one.get(f"http://127.0.0.1:{port}/v1/watch")
            statuses.append(r.status)
            held.append(r)
        assert statuses.count(200) == watch_mod.SEATS_PER_ADDRESS
        assert statuses.count(503) == watch_mod.MAX_VIEWERS - watch_mod.SEATS_PER_ADDRESS
        async with other.get(f"http://127.0.0.2:{port}/v1/watch") as r:
            assert r.status == 200  # another address still gets the page
            name, _ = await anext(read_events(r))
            assert name == "hello"
    finally:
        for r in held:
            r.close()
        for s in sessions:
            await s.close()
        await node.close()


async def test_a_stream_its_viewer_stopped_reading_is_dropped(monkeypatch):
    """Issue 34, item 14: a held stream that reads nothing gives its seat back."""
    import socket

    from swarmnode.node.web import routes
    from swarmnode.node.web import watch as watch_mod

    monkeypatch.setattr(watch_mod, "FRAME_EVERY_S", 0.01)
    monkeypatch.setattr(routes, "STALL_S", 0.5)
    node = await Node.create(peer_config(name="n" * 64))  # a big frame fills buffers sooner
    host, port = node.addr.rsplit(":", 1)
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.setblocking(False)
    try:
        await asyncio.get_running_loop().sock_connect(sock, (host, int(port)))
        request = f"GET /v1/watch HTTP/1.1\r\nHost: {node.addr}\r\n\r\n".encode()
        await asyncio.get_running_loop().sock_sendall(sock, request)
        await eventually(lambda: node.watch.viewers, 30, "the stream to be seated")
        # ... and it never reads a byte: dropped
        await eventually(lambda: not node.watch.viewers, 30, "the silent stream to lose its seat")
    finally:
        sock.close()
        await node.close()
