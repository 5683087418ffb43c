"""Control messages: small msgpack maps with a `version` and a `type`.

Large arrays never travel in here (see `swarmnode.gossip.wire.frames` for parameter payloads). Decoding is strict:
the size is capped before unpacking, msgpack's own container limits are set from the same cap,
and anything that is not a map with the right version and a known type raises `CodecError`, so a
route can answer 400 and log one line instead of crashing.
"""

from __future__ import annotations

from typing import Any

import msgpack
from swarmnode.gossip.errors import CodecError, VersionSkew

PROTOCOL_VERSION = 1
MAX_CONTROL_BYTES = 1 << 20  # 1 MiB: a membership digest of ~10k peers fits comfortably


def encode_control(msg_type: str, **fields: Any) -> bytes:
    """Pack a control message. `fields` must be msgpack-serialisable (no numpy arrays)."""
    body = {"version": PROTOCOL_VERSION, "type": msg_type, **fields}
    return msgpack.packb(body, use_bin_type=True)


def unpack_bounded(
    data: Any,
    *,
    max_bytes: int,
    max_array_len: int,
    max_map_len: int,
    error: type[Exception],
    what: str,
) -> Any:
    """`msgpack.unpackb` with every string, binary, array and map capped and no ext types: the
    most an insider's bytes may unpack to, bounded before anything is allocated. msgpack raises
    several unrelated types for bad input; each becomes one `error` naming `what`."""
    try:
        return msgpack.unpackb(
            data,
            raw=False,
            strict_map_key=True,
            max_bin_len=max_bytes,
            max_str_len=max_bytes,
            max_array_len=max_array_len,
            max_map_len=max_map_len,
            max_ext_len=0,
        )
    except Exception as exc:
        raise error(f"malformed {what}: {type(exc).__name__}: {exc}") from None


def decode_control(
    data: bytes | bytearray | memoryview,
    expected_type: str | tuple[str, ...] | None = None,
    *,
    max_bytes: int = MAX_CONTROL_BYTES,
) -> dict[str, Any]:
    """Unpack and validate a control message; raise `CodecError` on anything unexpected."""
    if len(data) > max_bytes:
        raise CodecError(f"control message of {len(data)} bytes exceeds the {max_bytes}-byte cap")
    msg = unpack_bounded(
        data,
        max_bytes=max_bytes,
        max_array_len=max_bytes // 2,
        max_map_len=max_bytes // 4,
        error=CodecError,
        what="msgpack",
    )
    if not isinstance(msg, dict):
        raise CodecError(f"control message must be a map, got {type(msg).__name__}")
    version = msg.get("version")
    if version != PROTOCOL_VERSION:
        # one wording on every side of a skew (a joiner quotes the seed's): both versions
        raise VersionSkew(
            f"another swarmnode release: protocol version {version!r} from the sender, "
            f"{PROTOCOL_VERSION} at the receiver (run the same release on every peer)"
        )
    msg_type = msg.get("type")
    if not isinstance(msg_type, str):
        raise CodecError("control message has no 'type'")
    if expected_type is not None:
        allowed = (expected_type,) if isinstance(expected_type, str) else expected_type
        if msg_type not in allowed:
            raise CodecError(f"expected message type {'/'.join(allowed)}, got {msg_type!r}")
    return msg


def require(msg: dict[str, Any], key: str, kind: type | tuple[type, ...]) -> Any:
    """Fetch `msg[key]` and check its type, raising `CodecError` naming the field."""
    if key not in msg:
        raise CodecError(f"message {msg.get('type')!r} lacks field {key!r}")
    value = msg[key]
    if not isinstance(value, kind) or (isinstance(value, bool) and kind is int):
        raise CodecError(
            f"field {key!r} of message {msg.get('type')!r} has type {type(value).__name__}"
        )
    return value
