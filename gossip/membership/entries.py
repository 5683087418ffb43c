"""Membership entries on the wire: the `Gossiped` tuple, its bounds, and strict parsing.

An entry is a msgpack array `[peer_id, addr, incarnation, heartbeat, state, age_s, meta]`;
`age_s` is how long ago the sender made a tombstone (0 for live entries) - a duration, not a
remote timestamp - so a tombstone expires everywhere about when it expires at its source instead
of circulating forever. Every field is bounded here, before anything reaches the table.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

from swarmnode.gossip.errors import CodecError
from swarmnode.gossip.membership.failure import STATES

MAX_ID_CHARS = 128
MAX_ADDR_CHARS = 256
MAX_META_KEYS = 12
MAX_META_KEY_CHARS = 32
MAX_META_STR_CHARS = 128
# Incarnations and heartbeats stay below 2^53 (exact in every JSON and float reader, and far
# inside msgpack's uint64): a peer refutes with `seen + 1`, so an entry at 2^64 - 1 once made the
# refuted incarnation unencodable and silenced its victim for good.
MAX_COUNTER = 2**53 - 1
_ENTRY_FIELDS = 7


class Proof(NamedTuple):
    """What authenticates a signed entry (`swarmnode.gossip.membership.records`): the owner's signed
    `record` bytes, its `signature` and `public` key, and the heartbeat hash chain the record
    commits to (`tip` at heartbeat `base`) with the value `reveal` that proves the entry's
    heartbeat."""

    record: bytes
    signature: bytes
    public: bytes
    base: int
    tip: bytes
    reveal: bytes


class Gossiped(NamedTuple):
    """One digest entry as it travels between peers (validated by `parse_entry`)."""

    peer_id: str
    addr: str
    incarnation: int
    heartbeat: int
    state: str
    age: float
    meta: Mapping[str, Any]
    # the signed self-record and heartbeat proof (`swarmnode.gossip.membership.records`); None in the
    # unsigned form used by the in-process simulation and the table's unit tests
    proof: Proof | None = None


def meta_problem(meta: object) -> str | None:
    """Why `meta` cannot travel in a digest, or None. Small flat maps of scalars only."""
    if not isinstance(meta, dict):
        return f"meta must be a map, got {type(meta).__name__}"
    if len(meta) > MAX_META_KEYS:
        return f"meta has {len(meta)} keys (at most {MAX_META_KEYS})"
    for key, value in meta.items():
        if not isinstance(key, str) or not 0 < len(key) <= MAX_META_KEY_CHARS:
            return f"meta key {key!r} must be a string of 1-{MAX_META_KEY_CHARS} characters"
        kind = type(value)  # the common exact types first: one check each, on the hot path
        if value is None or kind is int or kind is bool:
            continue
        if kind is float and math.isfinite(value):
            continue
        if kind is str and len(value) <= MAX_META_STR_CHARS:
            continue
        problem = _meta_value_problem(key, value)
        if problem is not None:
            return problem
    return None


def _meta_value_problem(key: str, value: object) -> str | None:
    """The full check of one meta value, for what the fast path of `meta_problem` left."""
    if isinstance(value, (bool, int)):
        return None
    if isinstance(value, float):
        return (
            None if math.isfinite(value) else f"meta value {key}={value!r} is not finite (use None)"
        )
    if isinstance(value, str):
        if len(value) > MAX_META_STR_CHARS:
            return f"meta value {key!r} is longer than {MAX_META_STR_CHARS} characters"
        return None
    return f"meta value {key!r} has type {type(value).__name__} (use None/bool/int/float/str)"


def parse_entry(raw: object) -> Gossiped:
    """Validate one received digest entry; raise `CodecError` naming what is wrong.

    Every field is checked before the entry exists. A digest of N members carries N entries
    and arrives ~fanout times an interval, so this is the membership's hottest path: the common
    shapes (exact str, int and float, a plain dict) take one cheap check each, and anything
    else falls through to the full check, which alone decides and names what is wrong.
    """
    if type(raw) is not list and not isinstance(raw, (list, tuple)):
        raise CodecError(f"a member entry must be an array of {_ENTRY_FIELDS} fields")
    if len(raw) != _ENTRY_FIELDS:
        raise CodecError(f"a member entry must be an array of {_ENTRY_FIELDS} fields")
    peer_id, addr, incarnation, heartbeat, state, age, meta = raw
    if not (type(peer_id) is str and 0 < len(peer_id) <= MAX_ID_CHARS):
        _check_id(peer_id)
    if not (type(addr) is str and _looks_like_addr(addr)):
        _check_addr(peer_id, addr)
    # `type(x) is int` leaves out bool (and every other subclass: the full check decides those)
    if not (type(incarnation) is int and 0 <= incarnation <= MAX_COUNTER):
        _check_counter(peer_id, "incarnation", incarnation)
    if not (type(heartbeat) is int and 0 <= heartbeat <= MAX_COUNTER):
        _check_counter(peer_id, "heartbeat", heartbeat)
    if state not in STATES:
        raise CodecError(f"member {peer_id!r}: unknown state {state!r}")
    if not ((type(age) is float or type(age) is int) and 0 <= age < math.inf):
        _check_age(peer_id, age)
    if not (type(meta) is dict and not meta):  # no meta: nothing more to check
        problem = meta_problem(meta)
        if problem is not None:
            raise CodecError(f"member {peer_id!r}: {problem}")
    return Gossiped(peer_id, addr, incarnation, heartbeat, state, float(age), meta)


# The full checks of parse_entry's fields: each raises what is wrong, or returns when the field
# is good after all (a str or int subclass, a tuple entry: rare, but not wrong).
def _check_id(peer_id: object) -> None:
    if not isinstance(peer_id, str) or not 0 < len(peer_id) <= MAX_ID_CHARS:
        raise CodecError(f"bad member id {peer_id!r}")


def _check_addr(peer_id: object, addr: object) -> None:
    if not isinstance(addr, str) or not _looks_like_addr(addr):
        raise CodecError(f"member {peer_id!r}: bad address {addr!r}")


def _check_counter(peer_id: object, name: str, value: object) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise CodecError(f"member {peer_id!r}: bad {name} {value!r}")
    if value > MAX_COUNTER:
        raise CodecError(f"member {peer_id!r}: {name} {value} is beyond 2^53")


def _check_age(peer_id: object, age: object) -> None:
    if not isinstance(age, (int, float)) or isinstance(age, bool) or not 0 <= age < math.inf:
        raise CodecError(f"member {peer_id!r}: bad tombstone age {age!r}")


def parse_entries(
    raw: object, limit: int, opener: Callable[[object], Gossiped] | None = None
) -> tuple[list[Gossiped], list[str]]:
    """Parse a digest: the good entries, and one reason per malformed entry dropped.

    A digest that is not a list, or longer than `limit`, is malformed as a whole (`CodecError`).
    """
    if not isinstance(raw, list):
        raise CodecError(f"a digest must be an array, got {type(raw).__name__}")
    if len(raw) > limit:
        raise CodecError(f"digest of {len(raw)} entries exceeds the cap of {limit}")
    good, dropped = [], []
    parse = parse_entry if opener is None else opener
    for item in raw:
        try:
            good.append(parse(item))
        except CodecError as exc:
            dropped.append(str(exc))
    return good, dropped


def _looks_like_addr(addr: str) -> bool:
    host, sep, port = addr.rpartition(":")
    return bool(sep and host) and port.isdigit() and len(addr) <= MAX_ADDR_CHARS
