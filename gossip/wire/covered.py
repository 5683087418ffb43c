"""Bodies whose every byte a verified envelope digest covers (gossip/auth/signer.py).

A parameter frame carries its own xxh3 checksum against corruption (gossip/wire/frames.py). When the
frame arrived inside an envelope whose BLAKE3 digest the tag or a member's signature just
verified, that check runs over the same bytes for nothing (3-13 ms per 100 MB here, once per
direction, on the critical path). `Signer.open_request` marks the body it hands out; the frame
decoder skips its checksum only for that very object. Marks are weak references keyed by id:
a body that is freed loses its mark, so a later object at the same address is never trusted.
"""

from __future__ import annotations

import weakref
from typing import Any

_MARKS: dict[int, weakref.ref[Any]] = {}


def mark(body: Any) -> None:
    """`body` (a memoryview: bytes cannot be weakly referenced) is covered by a verified digest."""
    key = id(body)
    _MARKS[key] = weakref.ref(body, lambda _ref: _MARKS.pop(key, None))


def is_covered(body: Any) -> bool:
    ref = _MARKS.get(id(body))
    return ref is not None and ref() is body
