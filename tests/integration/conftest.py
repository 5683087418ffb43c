"""Fixtures shared by the integration tests."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable

import pytest
from swarmnode.gossip.link.transport import Handler
from swarmnode.node.net.app import build_app, serve

Start = Callable[..., Awaitable[str]]


@pytest.fixture
async def start_server() -> AsyncIterator[Start]:
    """`await start_server(handlers, **build_app_kwargs) -> "127.0.0.1:port"`."""
    runners = []

    async def start(handlers: dict[str, Handler], **kw: object) -> str:
        runner, port = await serve(build_app(handlers, **kw), "127.0.0.1", 0, shutdown_timeout=1)
        runners.append(runner)
        return f"127.0.0.1:{port}"

    yield start
    for runner in runners:
        await runner.cleanup()
