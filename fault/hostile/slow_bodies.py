"""Slow bodies: raw HTTP/1.1 connections that promise a body and trickle it.

`SlowBodies(addr, n, routes)` keeps `n` connections open against a peer, each one promising a
19 KB body (a real parameter or control request's size) and sending one byte every 2 s: what
would hold every admission slot of a peer without the minimum body rate (docs/security.md,
"Bounds on tables, bodies and partners"). When the peer cuts a connection off, the
attacker opens another at once, so the pressure never lets up. `cut` counts the cut-offs.
Used as an async context manager (tests) or for a while with `run(seconds)` (the chaos runner).
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

PROMISED = 19_000  # within the body cap of the attacked routes (a model of >= ~5k parameters)
EVERY_S = 2.0


class SlowBodies:
    kind = "slow-bodies"

    def __init__(
        self,
        addr: str,
        n: int,
        routes: tuple[str, ...] = ("pushpull", "params"),
        every: float = EVERY_S,
    ) -> None:
        self.addr, self.n, self.routes, self.every = addr, n, routes, every
        self.cut = 0  # connections the peer closed on us
        self.timed_out = 0  # of which with a 408 (the body was too slow)
        self.open = 0  # connections open now
        self.peak = 0  # the most open at once
        self._tasks: list[asyncio.Task[None]] = []

    async def __aenter__(self) -> SlowBodies:
        self._tasks = [
            asyncio.create_task(self._one(self.routes[i % len(self.routes)])) for i in range(self.n)
        ]
        return self

    async def __aexit__(self, *exc: object) -> None:
        for t in self._tasks:
            t.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    async def run(self, seconds: float) -> None:
        """Hold the connections for `seconds` (cancel to stop early), then close them all."""
        async with self:
            await asyncio.sleep(seconds)

    def report(self) -> dict[str, Any]:
        return {
            "connections": self.n,
            "peak_open": self.peak,
            "cut": self.cut,
            "cut_408": self.timed_out,
            "accepted": 0,
        }

    async def _one(self, route: str) -> None:
        host, port = self.addr.rsplit(":", 1)
        while True:
            try:
                reader, writer = await asyncio.open_connection(host, int(port))
            except OSError:
                await asyncio.sleep(0.1)  # the peer is gone or full: try again
                continue
            self.open += 1
            self.peak = max(self.peak, self.open)
            try:
                head = (
                    f"POST /v1/{route} HTTP/1.1\r\nHost: {self.addr}\r\n"
                    "Content-Type: application/octet-stream\r\n"
                    f"Content-Length: {PROMISED}\r\n\r\n"
                )
                writer.write(head.encode() + b"\x00")
                await writer.drain()
                for _ in range(PROMISED - 1):
                    # the peer answering (408) or closing ends this connection
                    with contextlib.suppress(asyncio.TimeoutError):
                        line = await asyncio.wait_for(reader.readline(), self.every)
                        self.timed_out += line.startswith(b"HTTP/1.1 408")
                        break
                    writer.write(b"\x00")
                    await writer.drain()
                self.cut += 1
            except (ConnectionError, OSError):
                self.cut += 1
            finally:
                self.open -= 1
                writer.close()
