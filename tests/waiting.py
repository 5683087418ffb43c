"""Waiting for a condition with a deadline: the one way tests wait for state (never a bare sleep).

`wait_for` polls from plain code (a real process's status, a file), `eventually` from a coroutine
(in-process peers on the running loop). Both return the condition's first truthy value and fail
naming `what` once `timeout` seconds have passed.
"""

from __future__ import annotations

import asyncio
import socket
import time
from collections.abc import Callable
from typing import Any


def wait_for(cond: Callable[[], Any], timeout: float, what: str, every: float = 0.05) -> Any:
    """Poll `cond` until it returns something truthy; fail naming `what` after `timeout`.

    Exceptions from `cond` count as "not yet" (a peer not up, a refused connection); the last
    one is named in the failure."""
    deadline = time.monotonic() + timeout
    last_exc: Exception | None = None
    while time.monotonic() < deadline:
        try:
            value = cond()
            if value:
                return value
        except Exception as exc:  # a peer not up yet, a refused connection: keep polling
            last_exc = exc
        time.sleep(every)
    raise AssertionError(f"timed out after {timeout}s waiting for {what} (last error: {last_exc})")


async def eventually(
    cond: Callable[[], Any], timeout: float, what: str, every: float = 0.02
) -> Any:
    """`wait_for` for coroutines: the loop keeps serving while we wait. Exceptions propagate."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if value := cond():
            return value
        await asyncio.sleep(every)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}")


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nobody listens on (for a fixed --listen or a dead seed)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]
