"""A request its caller gives up on leaves no unread exception behind (issue: every asyncio task
is owned): aiohttp turns the cancel of a post whose own timer fires at once into a TimeoutError,
which `wait_for` never reads; asyncio then logs "Task exception was never retrieved" as an
ERROR, seen in a peer's log under a sybil flood."""

from __future__ import annotations

import asyncio
import gc

import pytest
from swarmnode.node.net.transport import HttpTransport

pytestmark = pytest.mark.timeout(30)


async def test_a_cancelled_request_whose_post_ends_in_a_timeout_logs_nothing() -> None:
    loop = asyncio.get_running_loop()
    reported: list[dict] = []
    loop.set_exception_handler(lambda _loop, context: reported.append(context))
    started = asyncio.Event()

    async def post(*_args: object) -> bytes:  # aiohttp's timer: a cancel comes out as a timeout
        started.set()
        try:
            await asyncio.sleep(60)  # a partner that does not answer in the test's time
        except asyncio.CancelledError:
            raise TimeoutError from None
        return b""

    transport = HttpTransport()
    transport._post = post  # type: ignore[method-assign]
    try:
        asking = asyncio.create_task(transport.request("127.0.0.1:9", "x", b"", timeout=30))
        await asyncio.wait_for(started.wait(), 10)
        asking.cancel()  # the round's grace ran out: the caller gives up
        with pytest.raises(asyncio.CancelledError):
            await asking
        for _ in range(3):  # the post task is collected, and would report here
            await asyncio.sleep(0)
            gc.collect()
        assert not [c for c in reported if "never retrieved" in c.get("message", "")], reported
    finally:
        loop.set_exception_handler(None)
        await transport.close()
