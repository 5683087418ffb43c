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


class Arrival:
    """What a server-side handler is handed: the request's body and what came with it, as one
    value (memberlist's `Packet{Buf, From, Timestamp}`), built by the transport that received
    it. `gossip.auth` hands its handler a copy with the opened body and its signer.

    - `body`: bytes, or a writable memoryview for a large body;
    - `remote`: the sender's network address as the transport saw it ("" where none: the
      in-memory network); membership charges newcomer rates to it;
    - `local`: the "host:port" it arrived at (over HTTP, the local end of the connection): which
      of this peer's names it was sent to, for `gossip.auth`'s receiver check;
    - `at`: `time.monotonic()` when the body was complete;
    - `signed_by`: the member whose Ed25519 key signed it ("" unsigned, or not yet opened);
    - `tap`: what watched a large body arrive (the streaming digest), for `gossip.auth` only.
    """

    __slots__ = ("at", "body", "local", "remote", "signed_by", "tap")

    def __init__(
        self,
        body: Any,
        *,
        remote: str = "",
        local: str = "",
        at: float = 0.0,
        signed_by: str = "",
        tap: Tap | None = None,
    ) -> None:
        self.body, self.remote, self.local, self.at = body, remote, local, at
        self.signed_by, self.tap = signed_by, tap

    def opened(self, body: Any, signed_by: str) -> Arrival:
        """The same arrival, its envelope opened: the inner body and who signed it."""
        return Arrival(body, remote=self.remote, local=self.local, at=self.at, signed_by=signed_by)


# A handler takes the `Arrival` and returns the response body (bytes-like, `Parts` or
# `Trailed`). Raising `RemoteError` answers with its status; any other SwarmnodeError, 400.
Handler = Callable[[Arrival], Awaitable[Any]]


class Tap(Protocol):
    """Watches a large body arrive (gossip.auth.signer's streaming digest): `feed(buf, end)` is called
    on the event loop after bytes up to `end` of the one buffer `buf` were filled."""

    def feed(self, buf: memoryview, end: int) -> None: ...

    def abort(self) -> None: ...

    async def settle(self) -> None: ...


# The tap that a transport feeds the *answer* it reads next: set by the caller
# (gossip.auth.transport) around `request`. A request's own tap travels in its `Arrival`.
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
