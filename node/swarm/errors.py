"""Errors of the swarm handle (`swarmnode.Swarm`): what the user's loop did that the swarm
cannot follow. Each says what happened and what to do, in the user's terms."""

from __future__ import annotations

from swarmnode.kernels.errors import SwarmnodeError


class SwarmError(SwarmnodeError):
    """Base of the swarm handle's errors."""


class ModelChangedError(SwarmError):
    """The model's parameters no longer are the views into the swarm's flat buffer: a layer
    added or replaced, a parameter rebound (`p.data = ...`, `params["W"] = W - lr * g`)."""


class DeviceMismatchError(SwarmError):
    """A parameter is on another device than the one the swarm was built for."""


class StepThreadError(SwarmError):
    """`step()` was called from a second thread: the steps are one thread's."""


class SwarmClosedError(SwarmError):
    """The swarm was closed (or its peer stopped): it takes no more steps."""
