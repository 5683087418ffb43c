"""Insiders of an in-process `Node`: clients it takes for live members of its table.

A request for a model (pull, push-pull) from a non-member is refused 403. A
test whose subject is a route's body handling, or the route fuzzer, must reach past that check,
as an insider holding the secret and its own admitted key would."""

from __future__ import annotations


def admit(node: object, *members: object) -> None:
    """Let `members` pull and push to `node` as live members: each a peer id (in-memory style,
    unsigned checks) or an object with a `key` (a `PeerKey`; `peer_id` defaults to the key's),
    whose public key then verifies its signed requests."""
    keys = {_peer_id(m): getattr(getattr(m, "key", None), "public", None) for m in members}
    peers = node.exchanger.peers  # type: ignore[attr-defined]
    is_member, public_key = peers.is_member, peers.public_key
    peers.is_member = lambda pid: pid in keys or is_member(pid)
    peers.public_key = lambda pid: keys.get(pid) or public_key(pid)
    node.signer.keys = peers.public_key  # type: ignore[attr-defined]


def _peer_id(member: object) -> str:
    if isinstance(member, str):
        return member
    return getattr(member, "peer_id", None) or member.key.peer_id  # type: ignore[attr-defined]
