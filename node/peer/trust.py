"""The peer's admission wiring: the mode from its config, and the remote address for rate limits."""

from __future__ import annotations

import logging

from swarmnode.gossip.auth import PeerKey
from swarmnode.gossip.membership import Admission, MembershipConfig
from swarmnode.node.peer.address import is_loopback
from swarmnode.node.peer.identity import read_trust_file
from swarmnode.node.settings import PeerConfig

log = logging.getLogger(__name__)


def build_admission(cfg: PeerConfig, key: PeerKey, addr: str) -> Admission:
    """`open` warns once at start (says, on loopback); `trust` reads the trust file (and always lists ourselves)."""
    mode = cfg.admission_mode
    if mode == "open":
        # on loopback only local users reach us: worth knowing, not acting on
        level = logging.INFO if is_loopback(addr.rpartition(":")[0]) else logging.WARNING
        log.log(
            level,
            "admission is open: anyone who reaches %s can join and list members; "
            "use --secret or --trust FILE for a closed swarm",
            addr,
        )
    trusted = read_trust_file(cfg.trust_file) if cfg.trust_file else []
    if mode == "trust":
        trusted.append(key.public)
    mc = MembershipConfig()
    return Admission(
        mode, trusted, new_member_rate=mc.new_member_rate, new_member_burst=mc.new_member_burst
    )
