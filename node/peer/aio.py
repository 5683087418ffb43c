"""Small asyncio helpers of the peer's lifecycle: cross-thread wake-ups, best-effort awaits."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from typing import Any

import numpy as np

log = logging.getLogger(__name__)


def threadsafe_setter(event: asyncio.Event) -> Callable[[], None]:
    """A callable for another thread that sets `event` on the current loop."""
    loop = asyncio.get_running_loop()

    def set_it() -> None:
        with contextlib.suppress(RuntimeError):  # the loop closed first: nobody is waiting
            loop.call_soon_threadsafe(event.set)

    return set_it


def finite_or_none(x: float) -> float | None:
    return float(x) if x is not None and np.isfinite(x) else None


async def quietly(coro: Any, timeout: float, what: str) -> None:
    try:
        await asyncio.wait_for(coro, timeout)
    except Exception as exc:  # best effort on the way out: log, never block shutdown
        log.info("%s did not complete: %s", what, exc)
