"""Errors of the chaos runner."""

from __future__ import annotations

from swarmnode.kernels.errors import SwarmnodeError


class ScenarioError(SwarmnodeError, ValueError):
    """A scenario file is invalid; the message is one line naming the problem."""
