"""Errors of the peer service."""

from __future__ import annotations

from swarmnode.kernels.errors import SwarmnodeError


class JoinError(SwarmnodeError):
    """No seed peer answered within the join timeout, or the state sync failed."""
