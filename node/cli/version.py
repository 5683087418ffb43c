"""The release and the envelope version it speaks: `--version`, the start banner."""

from __future__ import annotations

from swarmnode.gossip.auth import VERSION as ENVELOPE_VERSION

from swarmnode import __version__


def version_text() -> str:
    """`swarmnode 0.1.0 (envelope v4)`: peers of one swarm must speak the same envelope."""
    return f"swarmnode {__version__} (envelope v{ENVELOPE_VERSION})"
