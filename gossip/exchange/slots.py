"""Bounds on an `Exchanger`'s inbound bulk work: requests being served (`BulkSlot`) and pushed
models still being bounded and queued after their answer left (`PushMixes`)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Coroutine
from typing import Any

from swarmnode.gossip.errors import RemoteError

log = logging.getLogger(__name__)


class BulkSlot:
    """Admission for inbound bulk requests: answer 503 at once rather than queue unboundedly."""

    def __init__(self, sem: asyncio.Semaphore) -> None:
        self._sem = sem

    async def __aenter__(self) -> None:
        if self._sem.locked():
            raise RemoteError("busy: too many exchanges in flight, try another peer", status=503)
        await self._sem.acquire()

    async def __aexit__(self, *exc: object) -> None:
        self._sem.release()


class PushMixes:
    """A pushpull's mix (the push bound's pass over both models, then `mix_in`) runs after its
    answer is handed to the HTTP layer, so it overlaps sending the answer instead of delaying it
    (~45 ms per 100 MB, docs/benchmarks-history.md "Signing cost"). At most `limit` run at once:
    each holds one received model, so a handler waits for `room()` before taking another one."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._tasks: set[asyncio.Task[None]] = set()

    def __len__(self) -> int:
        return len(self._tasks)

    async def room(self) -> None:
        """Until fewer than `limit` mixes are in progress."""
        while len(self._tasks) >= self.limit:
            await asyncio.wait(set(self._tasks), return_when=asyncio.FIRST_COMPLETED)

    def start(self, mix: Coroutine[Any, Any, None]) -> None:
        task = asyncio.get_running_loop().create_task(mix)
        self._tasks.add(task)
        task.add_done_callback(self._done)

    async def settle(self) -> None:
        """Until every mix started so far is queued (or failed: logged)."""
        while self._tasks:
            await asyncio.gather(*set(self._tasks), return_exceptions=True)

    def _done(self, task: asyncio.Task[None]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            exc = task.exception()
            log.error("mixing a pushed model failed: %s", exc, exc_info=exc)
