"""The gossip errors, one family under `SwarmnodeError`, each with the HTTP status a route
answers it with (`status`): a handler that lets one escape answers that status and logs one line.

Kept in one module below every room (link, wire, auth, membership, exchange, robust import it;
it imports none of them), so that no room imports another only to name an error.
"""

from __future__ import annotations

from swarmnode.kernels.errors import SwarmnodeError


class TransportError(SwarmnodeError):
    """A request did not complete: peer unreachable, refused, timed out, or answered an error."""


class PeerUnreachable(TransportError):
    """Nothing answered at the address (connection refused, no such peer, partitioned)."""


class RequestTimeout(TransportError):
    """The peer did not answer within the request's deadline."""


class RemoteError(TransportError):
    """The peer answered with an error (a 4xx/5xx over HTTP). `status` follows HTTP codes.
    `said`: the raiser logged it already, or it is routine: the HTTP layer logs it at DEBUG."""

    def __init__(self, message: str, status: int = 400, said: bool = False) -> None:
        super().__init__(message)
        self.status = status
        self.said = said


# The answer to a push-pull that crossed ours (each side's request in flight to the other,
# gossip/exchange/compressed.py): the peer is alive and answering, and it serves our request
# once its own has come back; a partner that says it is no failure to back off from
CROSSED = 423


class AddressInUse(TransportError):
    """Another peer is already registered at this address."""


class WireError(SwarmnodeError, ValueError):
    """A parameter payload is malformed, too large, corrupted, or not a usable model."""

    status = 400


class CodecError(SwarmnodeError, ValueError):
    """A control message is malformed, too large, of an unknown version or of the wrong type."""


class VersionSkew(CodecError):
    """A control message of another swarmnode release (its protocol version is not ours):
    answered 426, and a joiner that gets it gives up at once (retrying cannot fix it)."""

    status = 426


class AuthError(SwarmnodeError):
    """A message failed authentication: unsigned, forged, wrong secret, replayed, truncated."""

    status = 401


class EnvelopeSkew(AuthError):
    """An envelope of another swarmnode release (its version is not ours): answered 426."""

    status = 426


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


class PeerKeyError(SwarmnodeError, ValueError):
    """A key is malformed (wrong length, not hex, unreadable)."""


class MembershipError(SwarmnodeError, ValueError):
    """A membership setting or value (meta, peer id, timing) is invalid."""


class JoinTimeout(MembershipError):
    """No seed answered a join request within the join timeout."""


class ExchangeError(SwarmnodeError):
    """An exchange setting is invalid, or a received model was rejected."""


class RefMismatch(RemoteError):
    """A delta arrived for a reference this peer does not hold (at that version)."""

    def __init__(self, message: str) -> None:
        super().__init__(message, status=409)


class AggregationError(SwarmnodeError, ValueError):
    """A rule cannot run on these inputs: too few rows for f, bad shape, unknown rule."""
