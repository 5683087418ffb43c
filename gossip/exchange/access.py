"""Who may pull or push a model: a live member, in its own name only.

Over HTTP every `params` and `pushpull` request of a peer is signed by its Ed25519 key and
opened only if the member table's key for that id verifies it (gossip/auth/signer.py); the signer's id
then sits in the request's `Arrival.signed_by`. What is left to check here is that the request's declared
`sender` (the field a pull names, the frame header of a push, which the compressed exchange
keys its per-pair state by) is that signer: a member could otherwise sign its own request and
name another member inside it, to use that member's pair state or get it blamed. Where nothing
signed the request (the in-memory network of the simulations and unit tests), the declared
sender must at least be a live member of the directory.
"""

from __future__ import annotations

from swarmnode.gossip.errors import RemoteError
from swarmnode.gossip.exchange.types import PeerDirectory
from swarmnode.gossip.wire import FrameHeader


def check_sender(peers: PeerDirectory, sender: object, route: str, signed_by: str) -> None:
    """403 unless `sender` signed this request (`signed_by`, "" where it was not signed) and
    is a live member."""
    if signed_by and sender != signed_by:
        # one log line, by the HTTP layer (with the caller's address), as for any refusal
        raise RemoteError(f"{route}: `sender` {sender!r} but signed by {signed_by!r}", 403)
    if not (isinstance(sender, str) and peers.is_member(sender)):
        raise RemoteError(f"{route}: `sender` {sender!r} is not a live member of this swarm", 403)


def check_pusher(peers: PeerDirectory, header: FrameHeader, signed_by: str) -> None:
    """`check_sender` for a pushed frame (its header, read once by the exchanger), before its
    payload is decoded or mixed."""
    check_sender(peers, header.sender, "pushpull", signed_by)


def check_named(header: FrameHeader, signed_by: str) -> None:
    """403 unless a pushed frame names the member whose signature its envelope's head carries.
    For a push answered while it arrived: that member was checked live at its head, and a
    member declared dead while its verified body was still arriving is no reason to refuse it
    (its answer would be cut off with no reason given)."""
    if header.sender != signed_by:
        raise RemoteError(f"pushpull: `sender` {header.sender!r} but signed by {signed_by!r}", 403)
