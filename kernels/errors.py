"""The root of swarmnode's exception hierarchy.

Every error swarmnode raises on purpose derives from `SwarmnodeError`, so a caller (the CLI, a
route handler) can catch one type and turn it into a one-line message or a 4xx answer. Each
package defines its own subclasses beside the code that raises them; this module sits in
`kernels/` only because `kernels` is the bottom of the import graph.
"""

from __future__ import annotations


class SwarmnodeError(Exception):
    """Base of every deliberate swarmnode error."""


class BackendError(SwarmnodeError):
    """The requested array backend or device is not available."""


class ShapeError(SwarmnodeError, ValueError):
    """An array has the wrong shape, dtype or layout for the operation."""
