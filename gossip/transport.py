"""The transport interface every exchange and membership protocol talks through.

Two implementations share it: `swarmnode.gossip.inmemory.InMemoryNetwork` (tests, large simulations) and
`swarmnode.node.net.transport.HttpTransport` (real peers over aiohttp). Fault wrappers in `fault/` wrap any
`Transport`. Keeping the protocols on this narrow interface is what lets one piece of protocol code
run unchanged against hundreds of simulated peers and against real processes.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from contextvars import ContextVar
from typing import Protocol

from swarmnode.kernels.errors import SwarmnodeError

# A handler takes the request body (bytes-like: bulk bodies may arrive as a memoryview) and returns
# the response body. Raising `RemoteError` answers with its status; any other SwarmnodeError, 400.
Handler = Callable[[bytes], Awaitable[bytes]]

# While a server-side handler runs: the "host:port" its request arrived at (over HTTP, the
# local end of the TCP connection). Handlers keep their one-argument signature; what needs
# to know which of a peer's names a request was sent to (gossip.auth's receiver check) reads
# it here. Empty outside a handler.
ARRIVED_AT: ContextVar[str] = ContextVar("swarmnode_arrived_at", default="")


class TransportError(SwarmnodeError):
    """A request did not complete: peer unreachable, refused, timed out, or answered an error."""


class PeerUnreachable(TransportError):
    """Nothing answered at the address (connection refused, no such peer, partitioned)."""


class RequestTimeout(TransportError):
    """The peer did not answer within the request's deadline."""


class RemoteError(TransportError):
    """The peer answered with an error (a 4xx/5xx over HTTP). `status` follows HTTP codes."""

    def __init__(self, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.status = status


class Transport(Protocol):
    """Request/response between peers, addressed by "host:port" strings."""

    async def request(self, addr: str, route: str, body: bytes, *, timeout: float) -> bytes:
        """Send `body` to `route` on the peer at `addr` and return its answer.

        Raises `PeerUnreachable`, `RequestTimeout` or `RemoteError` (all `TransportError`);
        never hangs past `timeout` seconds.
        """
        ...

    async def close(self) -> None:
        """Release connections. Idempotent."""
        ...
