"""Errors of the chaos runner."""

from __future__ import annotations

from swarmnode.kernels.errors import SwarmnodeError


class ScenarioError(SwarmnodeError, ValueError):
    """A scenario file is invalid; the message is one line naming the problem."""


class ChaosError(SwarmnodeError):
    """The run itself failed: a peer did not start, an event could not be carried out."""
