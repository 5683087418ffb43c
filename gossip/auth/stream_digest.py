"""BLAKE3 of a large body, computed while the body moves (docs/benchmarks.md, "Signing cost").

An envelope's digest covers everything between its magic and its fixed-size trailer
(gossip/auth/signer.py), so it can be hashed without knowing anything else about the message, on
either side of the wire. A reader copies each arriving chunk into one preallocated buffer and
calls `feed(buf, end)`; a sender (gossip/auth/seal_stream.py) calls it after each slice it wrote.
Every `STEP` bytes a range is queued for one worker thread, which hashes the ranges in order.
The hash thus runs while the rest of the body is still on the wire, and `finish` only waits
for the last range instead of hashing 100 MB on the critical path, before sending or after
receiving.

The event loop only records ranges; the hashing (which releases the GIL) runs in the default
executor, one job at a time per body. A digest is handed out only for the very buffer that was
fed, in full: anything else (a body another reader produced, a fault wrapper's corrupted copy,
two readers feeding one tap) makes `finish` return None and the caller hash the body itself.
"""

from __future__ import annotations

import asyncio
import threading
from collections import deque
from collections.abc import Callable
from typing import Any

import blake3
from swarmnode.gossip.errors import AuthError

STEP = (
    4 << 20
)  # bytes per hashing job: large enough to amortise a thread hop, small enough to lag little


class StreamDigest:
    """BLAKE3 of `lead + buf[skip : len(buf) - tail]` of the one buffer fed to it (`lead`: a
    few bytes hashed first, the sender's envelope head). Use from one event loop."""

    def __init__(
        self,
        skip: int,
        step: int = STEP,
        offset_of: Callable[[Any], int] | None = None,
        *,
        tail: int = 0,
        lead: bytes = b"",
    ) -> None:
        self.skip = skip
        self.tail = tail
        self._offset_of = offset_of  # the envelope's body offset from its first bytes
        self.step = step
        self._hasher = blake3.blake3(lead)
        self._buf: memoryview | None = None
        self._queued = skip  # bytes handed to the worker so far (from `skip` on)
        self._spoiled = False
        self._ranges: deque[tuple[int, int]] = deque()
        self._lock = threading.Lock()
        self._active = False
        self._abort = False
        self._jobs: list[asyncio.Future[None]] = []
        self._head_in: asyncio.Event | None = None  # set once the envelope's head is in `buf`
        self._head_bytes: int | None = None

    def body_offset(self, head: memoryview) -> int | None:
        """Where the body inside the envelope starts, from the envelope's first bytes (None:
        unknown). A reader places the envelope so that the body, a wire frame, is 64-byte
        aligned: a float32 payload at an odd offset made every pass over it several times
        slower (a NaN check's BLAS dot: 42-65 ms per 100 MB against 4 ms aligned)."""
        if self._offset_of is None:
            return None
        try:
            return int(self._offset_of(head))
        except (AuthError, ValueError, IndexError):  # too short to tell: the reader goes on
            return None

    def feed(self, buf: memoryview, end: int) -> None:
        """Bytes up to `end` of `buf` are in place (called on the event loop)."""
        if self._buf is None:
            self._buf = buf
        elif buf is not self._buf:
            self._spoiled = True  # a second body on the same tap: trust neither
            return
        if self._head_bytes is None:
            self._see_head(buf, end)
        end = min(end, len(buf) - self.tail)  # the trailer is not hashed
        if end - self._queued >= self.step:
            self._queue(end)

    def _see_head(self, buf: memoryview, end: int) -> None:
        """Note when the envelope's head (its length told by `offset_of`) is in place."""
        at = self.body_offset(buf[:end])
        if at is not None and at <= end:
            self._head_bytes = at
            self._event().set()

    def _event(self) -> asyncio.Event:
        if self._head_in is None:
            self._head_in = asyncio.Event()
        return self._head_in

    async def head(self) -> memoryview:
        """Once the envelope's head is in: the buffer being filled (its head readable; the
        rest still arriving). Waits for ever if it never is: race it against the read."""
        await self._event().wait()
        assert self._buf is not None
        return self._buf

    async def finish(self, data: Any) -> bytes | None:
        """The digest of `lead + data[skip:-tail]` if `data` is the whole buffer that was fed,
        else None."""
        buf = self._buf
        whole = (
            buf is not None
            and data is buf
            and not self._spoiled
            and not self._abort
            and len(buf) >= self.skip + self.tail
        )
        if whole:
            self._queue(len(buf) - self.tail)  # type: ignore[arg-type]
        else:
            self._abort = True
        await self.settle()
        return self._hasher.digest() if whole else None

    async def settle(self) -> None:
        """Wait for every hashing job this tap started (on every path: the jobs read `buf`).
        A job is forgotten only once done: a settle cancelled midway leaves the rest to the
        next one (a cancelled wait does not stop a thread that is still reading `buf`)."""
        while self._jobs:
            await asyncio.wait(self._jobs)
            done = [job for job in self._jobs if job.done()]
            self._jobs = [job for job in self._jobs if not job.done()]
            for job in done:
                job.result()  # a hashing job that failed is a bug: raise it

    def abort(self) -> None:
        """Stop hashing (the body failed): queued ranges are dropped; `settle` still waits."""
        self._abort = True

    def _queue(self, end: int) -> None:
        if end <= self._queued:
            return
        with self._lock:
            self._ranges.append((self._queued, end))
            start = not self._active
            self._active = True
        self._queued = end
        if start:
            loop = asyncio.get_running_loop()
            self._jobs.append(loop.run_in_executor(None, self._drain))

    def _drain(self) -> None:
        """Worker thread: hash queued ranges in order until none is left."""
        view = self._buf
        assert view is not None
        while True:
            with self._lock:
                if not self._ranges or self._abort:
                    self._ranges.clear()
                    self._active = False
                    return
                start, end = self._ranges.popleft()
            self._hasher.update(view[start:end])
