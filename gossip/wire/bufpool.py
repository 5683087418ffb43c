"""Large byte buffers reused once nothing references them.

A 100 MB buffer allocated afresh for every exchange (the frame a snapshot is copied into, the
buffer an arriving body is read into) and freed after the round makes each round pay for the
kernel mapping and zeroing 100 MB again, page by page on first touch: a copy into fresh pages
costs several times one into pages already touched (docs/benchmarks-history.md, "Signing cost").

A `BufferPool` keeps up to `keep` buffers it handed out and hands one out again only when the
pool holds the *only* reference to it: every view, memoryview, slice or decoded array over a
buffer (a frame still being sent, a received model waiting to be mixed) holds a reference to it,
so a buffer in use is never reused. Only sizes of at least `min_bytes` are pooled; requests for
a size the pool does not hold evict the least recently used free buffer.
"""

from __future__ import annotations

import sys
import threading

import numpy as np

MIN_POOLED_BYTES = 16 << 20
# references to a free pooled buffer, seen as `getrefcount(self._bufs[i])`: the pool's list and
# getrefcount's own argument (no loop variable: enumerate's cached tuple would hold one more)
_FREE_REFS = 2


class BufferPool:
    """Thread-safe: frames are built in worker threads, bodies read on the event loop."""

    def __init__(self, keep: int = 2, min_bytes: int = MIN_POOLED_BYTES) -> None:
        self.keep = keep
        self.min_bytes = min_bytes
        self._bufs: list[np.ndarray] = []  # most recently used last
        self._lock = threading.Lock()
        self.reused = 0  # buffers handed out again (tests, benchmarks)

    def take(self, nbytes: int) -> np.ndarray:
        """A uint8 buffer of exactly `nbytes` (contents undefined), reused when one is free."""
        if nbytes < self.min_bytes:
            return np.empty(nbytes, dtype=np.uint8)
        with self._lock:
            at = self._free(nbytes)
            if at is not None:  # by index: list.remove would compare arrays elementwise
                free = self._bufs.pop(at)
                self._bufs.append(free)
                self.reused += 1
                return free
            if len(self._bufs) >= self.keep:
                self._evict()
            buf = np.empty(nbytes, dtype=np.uint8)
            if len(self._bufs) < self.keep:
                self._bufs.append(buf)
            return buf

    def _free(self, nbytes: int) -> int | None:
        for i in range(len(self._bufs)):
            if self._bufs[i].nbytes == nbytes and self._unused(i):
                return i
        return None

    def _unused(self, i: int) -> bool:
        return sys.getrefcount(self._bufs[i]) == _FREE_REFS

    def _evict(self) -> None:
        """Forget the least recently used buffer nobody holds (one in use stays pooled)."""
        for i in range(len(self._bufs)):
            if self._unused(i):
                del self._bufs[i]
                return


FRAMES = BufferPool()  # wire frames built by this process (gossip/wire/frames.py)
BODIES = BufferPool()  # large HTTP bodies read by this process (node/net/transport.py)
# model-sized float32 vectors that live for a round or less: snapshots (node/peer/param_store.py),
# decoded lossy payloads (gossip/wire/codecs.py), a compressed exchange's differences and
# references (gossip/exchange/refs.py). Fresh 100 MB allocations cost many times the copy into
# a reused one in page faults, and a compressed round makes several on each side. A pair's
# references hold theirs for longer: room for 8.
MODELS = BufferPool(keep=8)


def floats(n: int) -> np.ndarray:
    """A float32 vector of n values (contents undefined) from `MODELS`: reused once nothing
    references it, or any view of it."""
    return MODELS.take(4 * n).view(np.float32)


def halves(n: int) -> np.ndarray:
    """A float16 vector of n values from `MODELS` (an fp16 frame's payload before framing)."""
    return MODELS.take(2 * n).view(np.float16)
