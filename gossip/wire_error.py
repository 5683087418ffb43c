"""`WireError`, apart so that the frame (wire.py) and the codec layouts (wire_codecs.py) share it."""

from __future__ import annotations

from swarmnode.kernels.errors import SwarmnodeError


class WireError(SwarmnodeError, ValueError):
    """A parameter payload is malformed, too large, corrupted, or not a usable model."""

    status = 400
