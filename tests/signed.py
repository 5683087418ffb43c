"""Signed member records for tests that speak the membership protocol to real peers."""

from __future__ import annotations

from typing import Any

from swarmnode.gossip.auth.peer_key import PeerKey
from swarmnode.gossip.membership.entries import Gossiped
from swarmnode.gossip.membership.records import seal, to_wire


def key_of(seed: int) -> PeerKey:
    """A deterministic key (tests only): the same seed, the same peer id."""
    return PeerKey.from_private_bytes(seed.to_bytes(32, "big"))


def signed_entry(
    key: PeerKey,
    *,
    peer_id: str | None = None,
    addr: str = "127.0.0.1:9",
    inc: int = 0,
    hb: int = 1,
    state: str = "alive",
    age: float = 0.0,
    meta: dict[str, Any] | None = None,
) -> list[Any]:
    """The wire form of a record signed by `key` (claiming `peer_id` if given: a forgery)."""
    g = Gossiped(peer_id or key.peer_id, addr, inc, hb, state, age, meta or {})
    sealed = seal(g, key)
    if state in ("suspect", "dead"):  # a hint: the signature is over the alive record
        sealed = sealed._replace(state=state)
    return to_wire(sealed)
