"""Test helpers for routes attacked by a client that is no peer (the attackers themselves live in
swarmnode.fault.hostile, shared with the chaos runner)."""

from __future__ import annotations


def admit(node: object, *peer_ids: str) -> None:
    """Let `peer_ids` push to an in-process `Node` as if they were live members of its table.

    Tests whose subject is a route's body handling (or its slots, or its envelope) push from
    a client that is no peer; a push declared by a non-member is refused 403 since issue 10
    item 7 (tests/integration/test_poisoned_push.py tests that refusal itself)."""
    peers = node.exchanger.peers  # type: ignore[attr-defined]
    is_member = peers.is_member
    peers.is_member = lambda pid: pid in peer_ids or is_member(pid)
