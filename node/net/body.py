"""Reading HTTP bodies of known, capped size into one preallocated buffer.

aiohttp's `read()` collects chunks in a list and joins them: for a 100 MB parameter payload
that is a second full copy plus the list. Here the size is checked against the cap *before*
anything is allocated, then the chunks are copied once into a bytearray of exactly that size.
"""

from __future__ import annotations

from collections.abc import Callable

from aiohttp import StreamReader
from swarmnode.kernels.errors import SwarmnodeError


class BodyError(SwarmnodeError):
    """A body is larger than allowed, or shorter than it said it would be."""

    def __init__(self, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.status = status

    @property
    def routine(self) -> bool:
        """A slow, unbudgeted or abandoned body: many a second under attack, or a peer that
        left mid-request; logged at INFO, not as a fault."""
        return self.status in (408, 503)


class BodyCut(BodyError):
    """The client hung up while its body was read (a peer that leaves or dies mid-request)."""

    @property
    def routine(self) -> bool:
        return True


async def read_body(
    stream: StreamReader,
    length: int | None,
    cap: int,
    on_chunk: Callable[[int], None] | None = None,
) -> bytearray:
    """The whole body; `BodyError` (413) past `cap` without reading it all. `on_chunk(n)` is
    told of each chunk as it arrives (a byte budget may raise to refuse it)."""
    if length is not None and length > cap:
        raise BodyError(f"body of {length} bytes exceeds the {cap}-byte limit", 413)
    if length is None:
        return await _read_unsized(stream, cap, on_chunk)
    buf = bytearray(length)
    view = memoryview(buf)
    pos = 0
    async for chunk in stream.iter_any():
        end = pos + len(chunk)
        if end > length:
            raise BodyError(f"body longer than its Content-Length {length}")
        if on_chunk is not None:
            on_chunk(len(chunk))
        view[pos:end] = chunk
        pos = end
    if pos != length:
        raise BodyError(f"body ended after {pos} of {length} bytes")
    return buf


async def _read_unsized(
    stream: StreamReader, cap: int, on_chunk: Callable[[int], None] | None
) -> bytearray:
    buf = bytearray()
    async for chunk in stream.iter_any():
        if len(buf) + len(chunk) > cap:
            raise BodyError(f"body exceeds the {cap}-byte limit", 413)
        if on_chunk is not None:
            on_chunk(len(chunk))
        buf += chunk
    return buf
