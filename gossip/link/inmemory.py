"""`InMemoryNetwork`: the in-process twin of the HTTP transport, for tests and simulations.

Hundreds of peers share one event loop; each registers its route handlers under an address and
calls the others through `network.transport(its_addr)`. What a caller sees follows HTTP:

- nothing registered at the address             -> `PeerUnreachable`
- no such route                                 -> `RemoteError` 404
- the handler raises `RemoteError`              -> `RemoteError` with the same status
- the handler raises another `SwarmnodeError`   -> `RemoteError` with its `status`, else 400
- the handler raises anything else              -> `RemoteError` 500, logged
- no answer within `timeout`                    -> `RequestTimeout`

Bodies cross as fresh `bytes`, so neither side can mutate the other's buffer. `freeze(addr)`
makes a peer hang like a SIGSTOPped process: requests to it, and requests it makes, wait until
`thaw(addr)` or their deadline. The handler runs in the caller's task, so a request that times
out cancels its handler, and no task outlives the request.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from swarmnode.gossip.errors import (
    AddressInUse,
    PeerUnreachable,
    RemoteError,
    RequestTimeout,
    TransportError,
)
from swarmnode.gossip.link.transport import Arrival, Handler, Parts, Trailed, completed
from swarmnode.kernels.errors import SwarmnodeError

log = logging.getLogger(__name__)


class InMemoryNetwork:
    """A set of addressable peers in one process. `latency` is added each way, in seconds."""

    def __init__(
        self,
        latency: float = 0.0,
        *,
        sleep: Callable[[float], Awaitable[Any]] = asyncio.sleep,
    ) -> None:
        if not latency >= 0:
            raise ValueError(f"latency must be >= 0, got {latency!r}")
        self.latency = latency
        self._sleep = sleep
        self._peers: dict[str, Mapping[str, Handler]] = {}
        self._frozen: dict[str, asyncio.Event] = {}
        self.stats: Counter[str] = Counter()

    def register(self, addr: str, handlers: Mapping[str, Handler]) -> None:
        """Serve `handlers` (route -> async handler) at `addr`."""
        if addr in self._peers:
            raise AddressInUse(f"address {addr} is already registered")
        self._peers[addr] = dict(handlers)

    def unregister(self, addr: str) -> None:
        """Stop serving `addr` (idempotent): later requests to it raise `PeerUnreachable`."""
        self._peers.pop(addr, None)

    def is_registered(self, addr: str) -> bool:
        return addr in self._peers

    def freeze(self, addr: str) -> None:
        """Requests to and from `addr` hang (until `thaw` or their deadline)."""
        self._frozen.setdefault(addr, asyncio.Event())

    def thaw(self, addr: str) -> None:
        """Let requests to and from `addr` proceed, including those already waiting."""
        event = self._frozen.pop(addr, None)
        if event is not None:
            event.set()

    def transport(self, addr: str) -> InMemoryTransport:
        """The `Transport` a peer at `addr` uses to call the others."""
        return InMemoryTransport(self, addr)

    async def _wait_thawed(self, addr: str) -> None:
        while (event := self._frozen.get(addr)) is not None:
            await event.wait()

    async def deliver(self, src: str, dst: str, route: str, body: bytes) -> bytes:
        """One request from `src` to `dst`, without a deadline (`InMemoryTransport` adds it)."""
        self.stats["requests"] += 1
        await self._wait_thawed(src)  # a frozen peer sends nothing
        if self.latency:
            await self._sleep(self.latency)
        await self._wait_thawed(dst)
        handlers = self._peers.get(dst)
        if handlers is None:
            self.stats["unreachable"] += 1
            raise PeerUnreachable(f"no peer at {dst}")
        handler = handlers.get(route)
        if handler is None:
            self.stats["remote_errors"] += 1
            raise RemoteError(f"{dst} has no route {route!r}", 404)
        answer = await _call(handler, body, dst, route, self.stats)
        if self.latency:
            await self._sleep(self.latency)
        self.stats["delivered"] += 1
        return answer


async def _call(handler: Handler, body: bytes, dst: str, route: str, stats: Counter[str]) -> bytes:
    """Run a handler and map its errors to what an HTTP caller would see. No remote address:
    the in-memory network has none (membership then charges a newcomer to its declared id)."""
    try:
        answer = await handler(Arrival(body, local=dst, at=time.monotonic()))
    except RemoteError as exc:
        stats["remote_errors"] += 1
        raise RemoteError(str(exc), exc.status) from None
    except SwarmnodeError as exc:
        stats["remote_errors"] += 1
        status = int(getattr(exc, "status", 400))  # as node/net/app.py answers it
        raise RemoteError(f"{type(exc).__name__}: {exc}", status) from None
    except Exception as exc:  # a bug in the handler: the peer answers 500, the caller goes on
        stats["remote_errors"] += 1
        log.error("handler %s at %s failed: %r", route, dst, exc, exc_info=exc)
        raise RemoteError(f"{dst} {route}: internal error", 500) from None
    if not isinstance(answer, (bytes, bytearray, memoryview, Parts, Trailed)):
        stats["remote_errors"] += 1
        log.error("handler %s at %s returned %s, not bytes", route, dst, type(answer).__name__)
        raise RemoteError(f"{dst} {route}: internal error", 500)
    return bytes(await completed(answer))  # a Trailed (a large sealed answer): hashed here


class InMemoryTransport:
    """The calling side of one peer on an `InMemoryNetwork`."""

    def __init__(self, network: InMemoryNetwork, addr: str) -> None:
        self.network = network
        self.addr = addr
        self._closed = False

    async def request(self, addr: str, route: str, body: bytes, *, timeout: float) -> bytes:
        if self._closed:
            raise TransportError(f"transport of {self.addr} is closed")
        if not timeout > 0:
            raise RequestTimeout(f"{addr} {route}: deadline already passed")
        work = self.network.deliver(self.addr, addr, route, bytes(await completed(body)))
        try:
            return await asyncio.wait_for(work, timeout)
        except asyncio.TimeoutError:
            self.network.stats["timeouts"] += 1
            raise RequestTimeout(f"{addr} {route}: no answer within {timeout:g} s") from None

    async def close(self) -> None:
        self._closed = True
