"""The root of swarmnode's exception hierarchy.

Every error swarmnode raises on purpose derives from `SwarmnodeError`, so a caller (the CLI, a
route handler) can catch one type and turn it into a one-line message or a 4xx answer. Each
package defines its own subclasses beside the code that raises them; this module sits in
`kernels/` only because `kernels` is the bottom of the import graph; so does `did_you_mean`,
the hint every part's errors share.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable

CLOSE_ENOUGH = 0.6  # difflib's ratio from which a valid word is offered for a misspelt one


class SwarmnodeError(Exception):
    """Base of every deliberate swarmnode error."""


class BackendError(SwarmnodeError):
    """The requested array backend or device is not available."""


class ShapeError(SwarmnodeError, ValueError):
    """An array has the wrong shape, dtype or layout for the operation."""


def did_you_mean(word: str, valid: Iterable[str], *, prefix: str = "") -> str:
    """`; did you mean 'x'?` for the entry of `valid` nearest to `word` (shown after
    `prefix`: a shared head left out of the comparison, which would make every name look
    close), or "" where none is close. Every "did you mean" of the project is this one, so
    that a misspelt key, flag, setting, variable or scenario word reads the same everywhere."""
    close = difflib.get_close_matches(word, list(valid), n=1, cutoff=CLOSE_ENOUGH)
    return f"; did you mean '{prefix}{close[0]}'?" if close else ""
