"""The release and the wire versions it speaks: `--version`, the start banner."""

from __future__ import annotations

from swarmnode.gossip.auth import VERSION as ENVELOPE_VERSION
from swarmnode.gossip.wire import PROTOCOL_VERSION

from swarmnode import __version__


def version_text() -> str:
    """`swarmnode 0.1.0 (protocol v1, envelope v4)`: the peers of one swarm must speak the same
    protocol (its control messages) and envelope (gossip/auth), or refuse each other (426)."""
    return f"swarmnode {__version__} (protocol v{PROTOCOL_VERSION}, envelope v{ENVELOPE_VERSION})"
