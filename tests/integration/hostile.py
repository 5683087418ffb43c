"""Test helpers for routes attacked by a client that is no peer (the attackers themselves live in
swarmnode.fault.hostile, shared with the chaos runner)."""

from __future__ import annotations


def admit(node: object, *members: object) -> None:
    """Let `members` pull and push to an in-process `Node` as if they were live members of its
    table: a peer id (unsigned in-memory style checks) or a `MemberClient`, whose key then
    verifies its signed requests.

    Tests whose subject is a route's body handling (or its slots, or its envelope) push from
    a client that is no peer; a request by a non-member is refused 403 since issue 10 item 7
    (tests/integration/test_hostile_exchange.py tests that refusal itself)."""
    keys = {
        getattr(m, "peer_id", m): getattr(getattr(m, "key", None), "public", None) for m in members
    }
    peers = node.exchanger.peers  # type: ignore[attr-defined]
    is_member, public_key = peers.is_member, peers.public_key
    peers.is_member = lambda pid: pid in keys or is_member(pid)
    peers.public_key = lambda pid: keys.get(pid) or public_key(pid)
    node.signer.keys = peers.public_key  # type: ignore[attr-defined]
