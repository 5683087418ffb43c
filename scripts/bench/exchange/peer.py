#!/usr/bin/env python
"""One benchmark peer process for scripts/bench/exchange/throughput.py (not meant to be run by
hand).

It serves, on 127.0.0.1:
- the peer app from node/net/app.py with an echo-style `pushpull` route (receive N bytes, answer
  this peer's own N-byte "model", as a real average-mode exchange does), the same echo behind
  envelopes on `sealed` (a swarm secret and a member key, as `--secret` peers: the request
  signed and tagged, the answer sealed; both helpers hold the same key) and a `bench/run` route
  that makes *this* peer drive a measurement against another peer and answer the timings as JSON;
- a plain aiohttp app (`await request.read()`, `web.Response(body=...)`, default settings) on a
  second port: the naive baseline;
- a raw TCP listener on a third port (blocking sockets in a thread): an 8-byte length and a
  mode byte, the body `recv_into` one preallocated buffer, the same number of bytes `sendall`
  back: after the whole body (`raw`: send, then receive) or at once, from a second thread, while
  the body arrives (`duplex`: both directions at the same time, as a full-duplex link allows).

The `memcpy` mode moves no byte between processes: one copy of N bytes each way, between two
buffers already touched, in one thread (the memory-copy floor of any exchange of N bytes).

It prints `ready HTTP_PORT NAIVE_PORT RAW_PORT` on stdout, then serves until stdin closes.
"""

from __future__ import annotations

import asyncio
import json
import resource
import socket
import struct
import sys
import threading
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import aiohttp
import numpy as np
from aiohttp import web
from swarmnode.gossip.link.transport import Arrival

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

from swarmnode.gossip.auth.peer_key import PeerKey
from swarmnode.gossip.auth.signer import Signer
from swarmnode.gossip.auth.transport import AuthTransport, auth_handlers
from swarmnode.node.net.app import build_app, serve
from swarmnode.node.net.transport import HttpTransport

MAX_BODY = 1 << 30
KEY = PeerKey.from_private_bytes(bytes(range(32)))  # a bench key: both helpers sign with it
SEALED = "sealed"


def signer(name: str) -> Signer:
    keys = {KEY.peer_id: KEY.public}.get
    return Signer("bench-secret", key=KEY, keys=keys, signed_routes={SEALED}, name=name)


_models: dict[int, bytearray] = {}
_inboxes: dict[int, bytearray] = {}


def own_model(n: int) -> bytearray:
    """This peer's n-byte "model" (cached: the echo must not time an allocation)."""
    if n not in _models:
        _models[n] = bytearray(b"\x5a" * n)
    return _models[n]


def raw_inbox(n: int) -> memoryview:
    """A reused, already-touched receive buffer: raw sockets at their best, no page faults."""
    if n not in _inboxes:
        _inboxes[n] = bytearray(b"\0" * n)
    return memoryview(_inboxes[n])


# --- raw sockets -------------------------------------------------------------------------


def _recv_exactly_into(sock: socket.socket, view: memoryview) -> None:
    pos = 0
    while pos < len(view):
        n = sock.recv_into(view[pos:])
        if n == 0:
            raise ConnectionError("peer closed mid-message")
        pos += n


HEAD = struct.Struct(">Q?")  # body length, full duplex


def raw_server(listener: socket.socket) -> None:
    """Echo-style, one message per connection: receive N bytes, answer N bytes (after them,
    or while they arrive)."""
    while True:
        conn, _ = listener.accept()
        with conn:
            head = bytearray(HEAD.size)
            _recv_exactly_into(conn, memoryview(head))
            n, duplex = HEAD.unpack(head)
            if duplex:
                _both_ways(conn, own_model(n), raw_inbox(n))
            else:
                _recv_exactly_into(conn, raw_inbox(n))
                conn.sendall(own_model(n))


def _both_ways(sock: socket.socket, out: bytearray, into: memoryview) -> None:
    """sendall(out) in a second thread while `into` is filled: both directions at once."""
    sender = threading.Thread(target=sock.sendall, args=(out,))
    sender.start()
    try:
        _recv_exactly_into(sock, into)
    finally:
        sender.join()


def raw_exchange(port: int, payload: bytearray, duplex: bool = False) -> float:
    """Seconds for one raw push-pull of `payload` (connect included, as HTTP's first is)."""
    answer = raw_inbox(len(payload))
    t0 = time.perf_counter()
    with socket.create_connection(("127.0.0.1", port)) as sock:
        sock.sendall(HEAD.pack(len(payload), duplex))
        if duplex:
            _both_ways(sock, payload, answer)
        else:
            sock.sendall(payload)
            _recv_exactly_into(sock, answer)
    return time.perf_counter() - t0


_copies: dict[int, tuple[np.ndarray, np.ndarray]] = {}


def memcpy_exchange(n: int) -> float:
    """Seconds for one copy of n bytes each way between touched buffers (the floor)."""
    if n not in _copies:
        _copies[n] = (np.full(n, 0x5A, np.uint8), np.zeros(n, np.uint8))
    a, b = _copies[n]
    t0 = time.perf_counter()
    np.copyto(b, a)
    np.copyto(a, b)
    return time.perf_counter() - t0


# --- drivers -----------------------------------------------------------------------------


def cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)  # all threads: the raw driver's too
    return usage.ru_utime + usage.ru_stime


async def _time(fn: Callable[[], Awaitable[int]], reps: int) -> list[float]:
    out = []
    for _ in range(reps):
        t0 = time.perf_counter()
        got = await fn()
        out.append(time.perf_counter() - t0)
        if got <= 0:
            raise RuntimeError("empty answer")
    return out


async def run_raw(spec: dict, duplex: bool = False) -> list[float]:
    payload = own_model(spec["size"])
    return [
        await asyncio.to_thread(raw_exchange, spec["raw_port"], payload, duplex)
        for _ in range(spec["reps"])
    ]


async def run_duplex(spec: dict) -> list[float]:
    return await run_raw(spec, duplex=True)


async def run_memcpy(spec: dict) -> list[float]:
    return [await asyncio.to_thread(memcpy_exchange, spec["size"]) for _ in range(spec["reps"])]


# Kept across runs, as a peer keeps its pool: the bench warms them with one unrecorded round.
_transport = HttpTransport(max_response_bytes=MAX_BODY)
_session: list[aiohttp.ClientSession] = []


async def run_http(spec: dict) -> list[float]:
    return await _echo(spec, _transport, "pushpull")


async def run_sealed(spec: dict) -> list[float]:
    sealing = AuthTransport(_transport, signer("127.0.0.1:9"))  # shares the pool with `http`
    return await _echo(spec, sealing, SEALED)


async def _echo(spec: dict, transport: Any, route: str) -> list[float]:
    payload = own_model(spec["size"])
    addr = f"127.0.0.1:{spec['http_port']}"

    async def once() -> int:
        answer = await transport.request(addr, route, payload, timeout=120.0)
        if len(answer) != len(payload):
            raise RuntimeError(f"answer of {len(answer)} bytes, sent {len(payload)}")
        return len(answer)

    return await _time(once, spec["reps"])


async def run_naive(spec: dict) -> list[float]:
    payload = bytes(own_model(spec["size"]))
    url = f"http://127.0.0.1:{spec['naive_port']}/pushpull"
    if not _session:
        _session.append(aiohttp.ClientSession())

    async def once() -> int:
        async with _session[0].post(url, data=payload) as resp:
            return len(await resp.read())

    return await _time(once, spec["reps"])


DRIVERS = {
    "raw": run_raw,
    "duplex": run_duplex,
    "memcpy": run_memcpy,
    "http": run_http,
    "sealed": run_sealed,
    "naive": run_naive,
}


async def bench_run(req: Arrival) -> bytes:
    body = req.body
    spec = json.loads(bytes(body))
    cpu0 = cpu_seconds()
    wall = await DRIVERS[spec["mode"]](spec)
    return json.dumps({"wall": wall, "cpu": cpu_seconds() - cpu0}).encode()


async def bench_cpu(req: Arrival) -> bytes:
    return json.dumps({"cpu": cpu_seconds()}).encode()


# --- the process -------------------------------------------------------------------------


async def pushpull(req: Arrival) -> bytearray:
    body = req.body
    return own_model(len(body))


async def naive_pushpull(request: web.Request) -> web.Response:
    body = await request.read()
    return web.Response(body=bytes(own_model(len(body))))


async def main() -> None:
    sealer = signer("")
    handlers = {"pushpull": pushpull, "bench/run": bench_run, "bench/cpu": bench_cpu}
    handlers |= auth_handlers({SEALED: pushpull}, sealer)
    app = build_app(
        handlers,
        max_body_bytes=MAX_BODY,
        tap=lambda route: sealer.tap(route) if route == SEALED else None,  # the others: bare
    )
    runner, http_port = await serve(app, "127.0.0.1", 0)
    sealer.name = f"127.0.0.1:{http_port}"
    naive = web.Application(client_max_size=MAX_BODY)
    naive.router.add_post("/pushpull", naive_pushpull)
    naive_runner = web.AppRunner(naive, access_log=None)
    await naive_runner.setup()
    site = web.TCPSite(naive_runner, "127.0.0.1", 0)
    await site.start()
    naive_port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    listener = socket.create_server(("127.0.0.1", 0))
    threading.Thread(target=raw_server, args=(listener,), daemon=True).start()
    print(f"ready {http_port} {naive_port} {listener.getsockname()[1]}", flush=True)
    try:
        await asyncio.to_thread(sys.stdin.read)  # the bench closes our stdin to stop us
    finally:
        await _transport.close()
        for session in _session:
            await session.close()
        await runner.cleanup()
        await naive_runner.cleanup()


if __name__ == "__main__":
    asyncio.run(main())
