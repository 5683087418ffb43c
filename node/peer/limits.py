"""What a peer reads from others, bounded: per-route body caps, the answer cap, peer sampling."""

from __future__ import annotations

import random

from swarmnode.gossip.auth import HEADER_BYTES as AUTH_HEADER_BYTES
from swarmnode.gossip.codec import MAX_CONTROL_BYTES
from swarmnode.gossip.membership import Membership
from swarmnode.gossip.wire import max_frame_bytes
from swarmnode.node.peer.config import PeerConfig


class MembershipPeers:
    """The exchange's `PeerDirectory` over membership: uniform over live peers."""

    def __init__(self, membership: Membership, rng: random.Random) -> None:
        self.membership = membership
        self.rng = rng

    def sample(self, k: int) -> list[tuple[str, str]]:
        live = [(m.peer_id, m.addr) for m in self.membership.live_peers()]
        return self.rng.sample(live, min(k, len(live)))


def body_caps(cfg: PeerConfig, n_params: int) -> dict[str, int]:
    """Per-route caps, checked before a body is read: only pushpull carries a model inbound,
    and never a larger one than ours; control routes never need more than a control message
    (plus its HMAC envelope)."""
    envelope = AUTH_HEADER_BYTES if cfg.secret else 0
    return {
        "pushpull": min(int(cfg.max_body_mb * 2**20), max_frame_bytes(n_params)) + envelope,
        "*": MAX_CONTROL_BYTES + envelope,
    }


def answer_cap(cfg: PeerConfig, n_params: int) -> int:
    """What any answer may weigh: a model frame of our size at most (a lying peer cannot make
    us read 1 GiB), or a control message."""
    envelope = AUTH_HEADER_BYTES if cfg.secret else 0
    return max(max_frame_bytes(n_params), MAX_CONTROL_BYTES) + envelope
