"""The transport interface every exchange and membership protocol talks through.

Two implementations share it: `swarmnode.gossip.link.inmemory.InMemoryNetwork` (tests, large simulations) and
`swarmnode.node.net.transport.HttpTransport` (real peers over aiohttp). Fault wrappers in `fault/` wrap any
`Transport`. Keeping the protocols on this narrow interface is what lets one piece of protocol code
run unchanged against hundreds of simulated peers and against real processes.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterator
from contextvars import ContextVar
from typing import Any, Protocol

# A handler takes the request body (bytes-like: bulk bodies may arrive as a memoryview) and returns
# the response body (bytes-like, `Parts` or `Trailed`). Raising `RemoteError` answers with its status; any other SwarmnodeError, 400.
Handler = Callable[[bytes], Awaitable[bytes]]

# While a server-side handler runs: the "host:port" its request arrived at (over HTTP, the
# local end of the TCP connection). Handlers keep their one-argument signature; what needs
# to know which of a peer's names a request was sent to (gossip.auth.signer's receiver check) reads
# it here. Empty outside a handler.
ARRIVED_AT: ContextVar[str] = ContextVar("swarmnode_arrived_at", default="")

# While a server-side handler runs: the peer id whose Ed25519 key signed the request (set by
# gossip.auth.signer once the signature checked out against that member's key). Empty when the
# request was not signed by a member key (the in-memory network, unsigned routes).
SIGNED_BY: ContextVar[str] = ContextVar("swarmnode_signed_by", default="")


class Tap(Protocol):
    """Watches a large body arrive (gossip.auth.signer's streaming digest): `feed(buf, end)` is called
    on the event loop after bytes up to `end` of the one buffer `buf` were filled."""

    def feed(self, buf: memoryview, end: int) -> None: ...

    def abort(self) -> None: ...

    async def settle(self) -> None: ...


# The tap that a transport feeds the body it reads next: set by the caller (gossip.auth.signer) around
# `request` for the answer, and by the HTTP app around a handler for the request it read.
BODY_TAP: ContextVar[Tap | None] = ContextVar("swarmnode_body_tap", default=None)


class Parts:
    """A body made of several buffers sent back to back (an envelope's header, then the
    payload): transports write them one after the other, so a 100 MB payload is never copied
    just to put a header in front of it. `bytes(parts)` joins them (small bodies, tests)."""

    __slots__ = ("buffers", "nbytes")

    def __init__(self, *buffers: Any) -> None:
        self.buffers = tuple(_as_bytes_view(b) for b in buffers)
        self.nbytes = sum(b.nbytes for b in self.buffers)

    def __len__(self) -> int:
        return self.nbytes

    def __iter__(self) -> Iterator[memoryview]:
        return iter(self.buffers)

    def __bytes__(self) -> bytes:
        return b"".join(self.buffers)


class Trailed:
    """A body whose last bytes (a trailer) are computed from the bytes before it while those
    are written: a signed envelope (gossip/auth/seal_stream.py) hashes its body in a worker thread
    as the transport sends it, then sends the tag and signature, instead of hashing 100 MB
    before its first byte. A streaming writer writes `buffers` in order, calls `sent(buf, end)`
    after each piece of one of them, then writes `await trailer()`; whoever writes one calls
    `await close()` when done, on every path (it stops and awaits the hashing). Writers that
    need all bytes at once (the in-memory network, a fault that corrupts or duplicates a body)
    take `await completed(body)`. `len()` is the whole body, trailer included."""

    def __init__(self, buffers: tuple[memoryview, ...], tail_bytes: int) -> None:
        self.buffers = buffers
        self.nbytes = sum(b.nbytes for b in buffers) + tail_bytes

    def __len__(self) -> int:
        return self.nbytes

    def sent(self, buf: memoryview, end: int) -> None:
        """Bytes up to `end` of `buf` (one of `buffers`) went out."""
        raise NotImplementedError

    async def trailer(self) -> bytes:
        """The last bytes, once every buffer was `sent` in full."""
        raise NotImplementedError

    async def close(self) -> None:
        """Stop and await any work still running for this body (idempotent)."""


async def completed(body: Any) -> Any:
    """`body` with every byte known: a `Trailed` becomes `Parts` (its trailer computed over
    all of it at once), anything else is returned as it is."""
    if not isinstance(body, Trailed):
        return body
    try:
        for buf in body.buffers:
            body.sent(buf, buf.nbytes)
        return Parts(*body.buffers, await body.trailer())
    finally:
        await body.close()


def _as_bytes_view(data: Any) -> memoryview:
    view = memoryview(data)
    return view if view.format == "B" and view.ndim == 1 else view.cast("B")


def body_views(body: Any) -> tuple[memoryview, ...]:
    """The buffers of a body: a `Parts`' own, or the one bytes-like as a byte view."""
    return body.buffers if isinstance(body, Parts) else (_as_bytes_view(body),)


class Transport(Protocol):
    """Request/response between peers, addressed by "host:port" strings."""

    async def request(self, addr: str, route: str, body: bytes, *, timeout: float) -> bytes:
        """Send `body` to `route` on the peer at `addr` and return its answer.

        Raises `PeerUnreachable`, `RequestTimeout` or `RemoteError` (all `TransportError`);
        never hangs past `timeout` seconds.
        """
        ...

    async def close(self) -> None:
        """Release connections. Idempotent."""
        ...
