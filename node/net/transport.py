"""`HttpTransport`: the `swarmnode.gossip.link.transport.Transport` interface over aiohttp.

One `ClientSession` (keep-alive pool) per transport, created lazily inside the running loop and
closed by `close()`. Every request has one deadline covering connect, send and receive. Failures
map onto the transport's errors so the protocols above never see aiohttp types:
refused/reset/DNS -> `PeerUnreachable`, deadline -> `RequestTimeout`, 4xx/5xx -> `RemoteError`
with the peer's status and one-line reason.

Bulk bodies (100 MB of parameters) take a path built for them, the client half of the one in
node/net/app.py: the request body is sent with a Content-Length in memoryview slices straight
from the caller's buffer (`_SlicedPayload`: no join, no copy into the transport's buffer beyond
the unsent rest of one slice; a `Trailed` body, a large signed envelope, is told of each slice
sent and its trailer goes last), and the answer is read into one preallocated buffer of its
declared size with a large read buffer so the socket is not paused every 128 KiB.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import aiohttp
from aiohttp import StreamReader
from aiohttp.abc import AbstractStreamWriter
from aiohttp.payload import Payload
from swarmnode.gossip.errors import PeerUnreachable, RemoteError, RequestTimeout
from swarmnode.gossip.link import BODY_TAP, Trailed, body_views
from swarmnode.gossip.wire import BODIES
from swarmnode.node.net.body import BodyError, read_body

CONTENT_TYPE = "application/octet-stream"
MAX_ERROR_TEXT = 500  # bytes of a peer's error body worth reading: one line, not a novel
SLICE_BYTES = 1 << 20
READ_BUFSIZE = 4 << 20
INLINE_BYTES = 1 << 20  # bodies up to this size come back as plain `bytes`
ALIGN = 64  # a frame inside a large body starts on this boundary (gossip/wire/frames.py's payload)


class HttpTransport:
    """POST `http://{addr}/v1/{route}` with a raw body; the answer comes back in one buffer.

    `body` may be any C-contiguous bytes-like object (bytes, bytearray, memoryview, a numpy
    array), a `gossip.link.transport.Parts` (sent back to back) or a `Trailed` (its trailer computed
    while the rest goes out; the caller closes it); it is sent without copying, so the caller must not change it until `request`
    returns. The answer is `bytes` up to `INLINE_BYTES`, else a writable `memoryview` (format
    "B") over one freshly allocated buffer that the caller owns.
    """

    def __init__(
        self,
        *,
        max_response_bytes: int = 1 << 30,
        pool_size: int = 64,
        read_bufsize: int = READ_BUFSIZE,
    ) -> None:
        self.max_response_bytes = max_response_bytes
        self.pool_size = pool_size
        self.read_bufsize = read_bufsize
        self._session: aiohttp.ClientSession | None = None
        self._closed = False

    def _client(self, where: str) -> aiohttp.ClientSession:
        if self._closed:  # close() may have run while this request waited for its first step
            raise PeerUnreachable(f"transport closed; cannot reach {where}")
        if self._session is None:
            connector = aiohttp.TCPConnector(limit=self.pool_size, ttl_dns_cache=60)
            self._session = aiohttp.ClientSession(
                connector=connector, auto_decompress=False, read_bufsize=self.read_bufsize
            )
        return self._session

    async def request(
        self, addr: str, route: str, body: Any, *, timeout: float
    ) -> bytes | memoryview:
        where = f"{addr} /v1/{route}"
        self._client(where)  # fail fast when closed
        try:
            payload = _SlicedPayload(body)
            # aiohttp's own deadline covers connect+send+headers; wait_for also bounds reading
            # the body, whatever aiohttp version and timer semantics are installed.
            post = asyncio.ensure_future(
                self._post(f"http://{addr}/v1/{route}", where, payload, timeout)
            )
            # a caller that gives up (a round's grace ran out) cancels wait_for, which cancels
            # the post and does not read its end: aiohttp turns that cancel into a TimeoutError
            # when its own timer fires too, logged as "Task exception was never retrieved"
            post.add_done_callback(_read_end)
            return await asyncio.wait_for(post, timeout)
        except (TimeoutError, asyncio.TimeoutError):
            raise RequestTimeout(f"{where}: no answer within {timeout:.2f}s") from None
        except aiohttp.ClientResponseError as exc:  # it answered, but not in HTTP we can parse
            raise RemoteError(f"{where}: malformed answer: {exc.message}", 502) from None
        except aiohttp.InvalidURL as exc:  # "host:port" that is no address
            raise PeerUnreachable(f"{where}: bad address: {exc}") from None
        except (aiohttp.ClientError, OSError) as exc:  # refused, reset, DNS, disconnected
            raise PeerUnreachable(f"{where}: {type(exc).__name__}: {exc}") from None
        except BodyError as exc:  # the answer is larger than we accept, or cut short
            raise RemoteError(f"{where}: {exc}", exc.status) from None

    async def _post(
        self, url: str, where: str, payload: Payload, timeout: float
    ) -> bytes | memoryview:
        deadline = aiohttp.ClientTimeout(total=timeout)
        async with self._client(where).post(url, data=payload, timeout=deadline) as resp:
            if resp.status >= 400:
                raw = await resp.content.read(MAX_ERROR_TEXT)  # one line, not a novel
                text = " ".join(raw.decode("utf-8", "replace").split())
                raise RemoteError(f"{where} answered {resp.status}: {text}", resp.status)
            tap = BODY_TAP.get()  # an envelope's digest, hashed while the answer arrives
            return await read_sized_body(
                resp.content,
                resp.content_length,
                self.max_response_bytes,
                tap=tap.feed if tap is not None else None,
                align=getattr(tap, "body_offset", None),
            )

    async def close(self) -> None:
        """Close the pool. Idempotent; a closed transport raises `PeerUnreachable`."""
        self._closed = True
        if self._session is not None:
            session, self._session = self._session, None
            await session.close()


def _read_end(task: asyncio.Future[Any]) -> None:
    """Mark a finished post's exception read: whoever awaited it has it, or gave up on it."""
    if not task.cancelled():
        task.exception()


class _SlicedPayload(Payload):
    """A request body (bytes-like or `Parts`), written in memoryview slices, a drain after each.

    aiohttp's `BytesPayload` writes the whole buffer at once: on Python < 3.12 that joins it
    with the headers (a full copy) and copies whatever the socket did not take at once into the
    transport's buffer (a second one), both on the event loop.
    """

    def __init__(self, body: Any) -> None:
        # TypeError for a non-contiguous buffer: a caller bug
        views = body.buffers if isinstance(body, Trailed) else body_views(body)
        super().__init__(views, content_type=CONTENT_TYPE)
        self._body = body
        self._size = len(body) if isinstance(body, Trailed) else sum(v.nbytes for v in views)
        self._autoclose = True  # nothing to release: the caller owns the buffer

    def decode(self, encoding: str = "utf-8", errors: str = "strict") -> str:
        return b"".join(self._value).decode(encoding, errors)

    async def write(self, writer: AbstractStreamWriter) -> None:
        await write_body(writer, self._body)

    async def write_with_length(
        self, writer: AbstractStreamWriter, content_length: int | None
    ) -> None:
        # aiohttp passes our own size (the Content-Length it sent) or None
        await write_body(writer, self._body)


async def write_body(writer: Any, body: Any) -> None:
    """Every buffer of `body` in slices; a `Trailed`'s trailer last, once the rest is out (its
    hashing runs in a worker thread meanwhile)."""
    if not isinstance(body, Trailed):
        for view in body_views(body):
            await write_sliced(writer, view)
        return
    for view in body.buffers:
        await write_sliced(writer, view, body.sent)
    await writer.write(await body.trailer())


async def write_sliced(
    writer: Any, view: memoryview, sent: Callable[[memoryview, int], None] | None = None
) -> None:
    """`view` in SLICE_BYTES memoryview slices (a small one in one write: an envelope's head);
    `sent(view, end)` after each."""
    for start in range(0, view.nbytes, SLICE_BYTES):
        end = min(start + SLICE_BYTES, view.nbytes)
        await writer.write(view[start:end])  # drains once past 64 KiB
        if sent is not None:
            sent(view, end)


async def read_sized_body(
    stream: StreamReader,
    length: int | None,
    cap: int,
    on_chunk: Callable[[int], None] | None = None,
    tap: Callable[[memoryview, int], None] | None = None,
    align: Callable[[memoryview], int | None] | None = None,
) -> bytes | memoryview:
    """A whole HTTP body (request or response), `BodyError` (413) past `cap` before reading.

    Up to `INLINE_BYTES`: `bytes`. Larger: a writable memoryview over ONE buffer of the declared
    size, each arriving chunk copied in once (aiohttp's `read()` would collect and join them).
    The buffer is a numpy allocation because numpy asks the kernel for huge pages past 4 MiB:
    filling 100 MB of fresh 4 KiB pages costs ~25k page faults, which measured ~10x the copy
    itself (268 ms vs 25 ms here) and more than the whole raw-socket transfer. Bodies without a
    Content-Length (chunked) take `swarmnode.node.net.body.read_body`, which enforces the cap as they
    stream. `on_chunk(n)` is told of every n bytes delivered, before they are kept (the server's
    byte budget: it may raise to refuse them). `tap(buf, end)` is told, for a large body, that
    `buf` holds the body's bytes up to `end` (a streaming digest: gossip/auth/stream_digest.py).
    `align(first_bytes)`, if given, says where a frame starts inside the body (an envelope's
    header length): the body is placed so that frame starts on a 64-byte boundary.
    """
    if length is None:
        return bytes(await read_body(stream, None, cap, on_chunk))
    if length > cap:
        raise BodyError(f"body of {length} bytes exceeds the {cap}-byte limit", 413)
    if length == 0:
        return b""
    if length <= INLINE_BYTES:
        try:
            small = await stream.readexactly(length)
        except asyncio.IncompleteReadError as exc:
            raise BodyError(f"body ended after {len(exc.partial)} of {length} bytes") from None
        if on_chunk is not None:
            on_chunk(length)
        return small
    slack = ALIGN if align is not None else 0
    raw = BODIES.take(length + slack)  # gossip/wire/bufpool.py: reused once unreferenced
    chunk = await stream.readany()
    at = align(memoryview(chunk)) if align is not None and chunk else None
    shift = -(raw.ctypes.data + at) % ALIGN if at is not None else 0  # the frame's address
    buf = memoryview(raw)[shift : shift + length]
    pos = 0
    while True:
        end = pos + len(chunk)
        if not chunk or end > length:  # the parser stops at Content-Length; be sure anyway
            raise BodyError(f"body ended after {pos} of {length} bytes")
        if on_chunk is not None:
            on_chunk(len(chunk))
        buf[pos:end] = chunk
        pos = end
        if tap is not None:
            tap(buf, pos)
        if pos >= length:
            return buf
        chunk = await stream.readany()
