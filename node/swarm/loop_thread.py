"""`LoopThread`: an asyncio event loop of the swarm's own, on a background thread.

The peer (membership, exchange, HTTP service, page) runs there, whatever the user's thread does:
a plain script, an asyncio program (its loop is another one), a notebook (whose kernel runs a
loop of its own in the main thread: `asyncio.run` would refuse to start there, and nothing here
calls it). The user's thread hands coroutines over with `call` (blocking) or `wrap` (awaitable
from another loop); `stop` ends the loop once the peer has closed, and joins the thread.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

log = logging.getLogger(__name__)

T = TypeVar("T")
THREAD_NAME = "swarmnode-swarm"
STOP_S = 5.0  # the loop's own wind-down (cancelled leftovers, the default executor)


class LoopThread:
    """One event loop on one daemon thread (a forgotten `close()` never holds the process)."""

    def __init__(self, name: str = THREAD_NAME) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        try:
            self.loop.run_forever()
            self.loop.run_until_complete(self._wind_down())
        finally:
            self.loop.close()

    async def _wind_down(self) -> None:
        """What the peer left behind (nothing, once it closed; a failed start may leave some):
        cancelled and awaited, then the default executor's threads joined."""
        me = asyncio.current_task()
        left = [t for t in asyncio.all_tasks() if t is not me]
        for task in left:
            task.cancel()
        await asyncio.gather(*left, return_exceptions=True)
        await self.loop.shutdown_asyncgens()
        await self.loop.shutdown_default_executor()

    def submit(self, coro: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
        return asyncio.run_coroutine_threadsafe(coro, self.loop)

    def call(self, coro: Coroutine[Any, Any, T], timeout: float | None = None) -> T:
        """Run `coro` on the loop and wait for its result here (not from the loop's thread)."""
        if threading.current_thread() is self._thread:
            coro.close()
            raise RuntimeError("LoopThread.call from its own loop would wait for itself")
        return self.submit(coro).result(timeout)

    async def wrap(self, coro: Coroutine[Any, Any, T]) -> T:
        """Await `coro`, run on this loop, from another running loop."""
        return await asyncio.wrap_future(self.submit(coro))

    def stop(self, timeout: float = STOP_S) -> None:
        """End the loop and join its thread (idempotent)."""
        if self.loop.is_closed():
            return
        try:
            self.loop.call_soon_threadsafe(self.loop.stop)
        except RuntimeError:  # closed meanwhile
            return
        if threading.current_thread() is not self._thread:
            self._thread.join(timeout)
            if self._thread.is_alive():
                log.warning("the swarm's event loop did not stop within %.0f s", timeout)

    @property
    def alive(self) -> bool:
        return self._thread.is_alive()
