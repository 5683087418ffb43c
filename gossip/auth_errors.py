"""The errors of request authentication (gossip.auth, gossip.operator, gossip.replay)."""

from __future__ import annotations

from swarmnode.gossip.transport import RemoteError, TransportError
from swarmnode.kernels.errors import SwarmnodeError


class AuthError(SwarmnodeError):
    """A message failed authentication: unsigned, forged, wrong secret, replayed, truncated."""

    status = 401


class NotAMember(AuthError):
    """A request signed in the name of a peer id that is no live member here (or unsigned
    where a member's signature is required): answered 403."""

    status = 403


class UnauthenticatedRequest(AuthError, RemoteError):
    """Raised by a server-side handler: the request is answered with `status` (401, or 403 for
    a non-member), the handler never runs."""

    def __init__(self, message: str, status: int = 401) -> None:
        RemoteError.__init__(self, message, status=status)


class UnauthenticatedResponse(AuthError, TransportError):
    """Raised by `AuthTransport`: the peer's answer failed authentication.

    It is also a `TransportError`, so protocol code that treats a failed request as a failed
    peer (membership, exchange) does the same for a peer that cannot prove it has the secret.
    """
