"""Read-only views of the member table: `Member` rows, `Change` notices, `Timing` settings."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NamedTuple


class Member(NamedTuple):
    """A read-only view of one member at the time it was taken. Do not mutate `meta`."""

    peer_id: str
    addr: str
    state: str
    incarnation: int
    heartbeat: int
    last_heard_s: float
    meta: Mapping[str, Any]

    def as_status(self) -> dict[str, Any]:
        """The member's row of `GET /v1/status` (see docs/architecture.md)."""
        return {
            "peer_id": self.peer_id,
            "name": self.meta.get("name"),  # the owner's own (signed) word, not unique
            "addr": self.addr,
            "state": self.state,
            "incarnation": self.incarnation,
            "heartbeat": self.heartbeat,
            "last_heard_s": round(self.last_heard_s, 3),
            "step": self.meta.get("step"),
            "loss": self.meta.get("loss"),
            "acc": self.meta.get("acc"),
            "device": self.meta.get("device"),
        }


class Change(NamedTuple):
    """A member's state or incarnation changed in our table (`old` is None for a new member)."""

    peer_id: str
    addr: str
    old: str | None
    new: str
    incarnation: int


class Timing(NamedTuple):
    """The failure detector's settings (seconds); see `swarmnode.gossip.membership.failure`."""

    suspect_after: float
    dead_after: float
    tombstone_ttl: float
    gossip_interval: float
    fanout: int
    dead_after_max: float = 0.0  # the stretch's cap (0: 4 x dead_after; failure.dead_cap)
