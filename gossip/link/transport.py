"""The transport interface every exchange and membership protocol talks through.

Two implementations share it: `swarmnode.gossip.link.inmemory.InMemoryNetwork` (tests, large simulations) and
`swarmnode.node.net.transport.HttpTransport` (real peers over aiohttp). Fault wrappers in `fault/` wrap any
`Transport`. Keeping the protocols on this narrow interface is what lets one piece of protocol code
run unchanged against hundreds of simulated peers and against real processes.
"""

from __future__ import annotations

import asyncio
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
    - `tap`: what watched a large body arrive (the streaming digest), for `gossip.auth` only;
    - `arriving`: None once the body is whole; while it still streams in (a large enveloped
      body whose head arrived: node/net/app.py), what resolves to the whole body (for a handler
      behind `gossip.auth`, to the body opened and verified), or raises if it never is. `body`
      is then the buffer being filled: nothing but an envelope's head may be read from it.
      Only a handler marked `takes_arriving` is handed such an arrival.
    """

    __slots__ = ("arriving", "at", "body", "local", "remote", "signed_by", "tap")

    def __init__(
        self,
        body: Any,
        *,
        remote: str = "",
        local: str = "",
        at: float = 0.0,
        signed_by: str = "",
        tap: Tap | None = None,
        arriving: Awaitable[Any] | None = None,
    ) -> None:
        self.body, self.remote, self.local, self.at = body, remote, local, at
        self.signed_by, self.tap, self.arriving = signed_by, tap, arriving

    def opened(self, body: Any, signed_by: str, arriving: Awaitable[Any] | None = None) -> Arrival:
        """The same arrival, its envelope opened: the inner body and who signed it."""
        return Arrival(
            body,
            remote=self.remote,
            local=self.local,
            at=self.at,
            signed_by=signed_by,
            arriving=arriving,
        )


def takes_arriving(handler: Callable[..., Any]) -> Callable[..., Any]:
    """Mark a handler that may be handed an `Arrival` whose body still streams in (it awaits
    `arriving` before it reads the body, and may answer first: `Early`)."""
    handler.takes_arriving = True  # type: ignore[attr-defined]
    return handler


def is_takes_arriving(handler: Any) -> bool:
    return bool(getattr(handler, "takes_arriving", False))


class Early:
    """A handler's answer given before the request's body is whole: `answer` may be sent at
    once, but its last bytes only once `done` (the request's own checks and their work: the
    body verified, decoded, its mix queued) has succeeded; if `done` fails the answer is cut
    off, so the caller never takes a complete answer to a request this peer refused."""

    __slots__ = ("answer", "done")

    def __init__(self, answer: Any, done: Awaitable[None]) -> None:
        self.answer, self.done = answer, done


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


class Gated(Trailed):
    """An answer whose last bytes wait for `gate` (an awaitable that raises when the request it
    answers was refused): a `Trailed` answer's trailer, or a plain one's last `hold` bytes.
    `close()` closes the inner answer and settles the gate."""

    def __init__(self, answer: Any, gate: Awaitable[Any], hold: int = 64) -> None:
        if isinstance(answer, Trailed):
            buffers, tail = answer.buffers, answer.nbytes - sum(b.nbytes for b in answer.buffers)
            self._held: memoryview | None = None
        else:
            views = body_views(answer)
            last = views[-1] if views else memoryview(b"")
            hold = min(hold, last.nbytes)
            buffers, tail = (*views[:-1], last[: last.nbytes - hold]), hold
            self._held = last[last.nbytes - hold :]
        super().__init__(tuple(buffers), tail)
        self._answer = answer
        self._gate = asyncio.ensure_future(gate)

    def sent(self, buf: memoryview, end: int) -> None:
        if isinstance(self._answer, Trailed):
            self._answer.sent(buf, end)

    async def trailer(self) -> bytes:
        await asyncio.shield(self._gate)  # raises: the request was refused, cut the answer
        if self._held is not None:
            return self._held.tobytes()
        return await self._answer.trailer()

    async def close(self) -> None:
        if not self._gate.done():  # the answer was abandoned: its request's work is too
            self._gate.cancel()
        await asyncio.gather(self._gate, return_exceptions=True)
        if isinstance(self._answer, Trailed):
            await self._answer.close()


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
