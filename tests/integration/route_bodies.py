"""Hand-built bodies for the route tests: valid and malformed frames, entries and cases per route."""

from __future__ import annotations

import math
import struct
from dataclasses import dataclass

import msgpack
import numpy as np
import pytest
import xxhash
from swarmnode.gossip.wire.control import MAX_CONTROL_BYTES, encode_control

from tests.signed import key_of, signed_entry

pytestmark = pytest.mark.timeout(90)

ADMIN_ROUTES = ("admin/fault", "admin/byzantine", "admin/slowdown")


# --- bodies --------------------------------------------------------------------------------


TESTER = key_of(7)
PUSHER_KEY = key_of(8)  # signs the model routes' requests; admitted as a member by `node`
PUSHER = PUSHER_KEY.peer_id  # the `sender` of the hand-built frames


def frame(header: object, payload: bytes, *, pad_byte: bytes = b"\0") -> bytes:
    """A parameter frame built by hand (not by swarmnode.gossip.wire.frames), so the header can be anything."""
    head = msgpack.packb(header, use_bin_type=True)
    padding = pad_byte * (-(4 + len(head)) % 64)
    return struct.pack(">I", len(head)) + head + padding + payload


def header_for(payload: bytes, shape: object, **override: object) -> dict[str, object]:
    h: dict[str, object] = {
        "version": 1,
        "type": "params",
        "sender": PUSHER,
        "step": 1,
        "dtype": "float32",
        "shape": shape,
        "codec": "raw",
        "nbytes": len(payload),
        "checksum": "xxh3",
        "crc": xxhash.xxh3_64_digest(payload),
    }
    h.update(override)
    return h


def params_frame(vec: np.ndarray, **override: object) -> bytes:
    payload = np.ascontiguousarray(vec, dtype="<f4").tobytes()
    return frame(header_for(payload, list(vec.shape), **override), payload)


def entry(peer_id: str | None = None, state: str = "alive", hb: int = 1, **kw: object) -> list:
    """A record signed by the tester's key; with another `peer_id` it is a forgery."""
    return signed_entry(TESTER, peer_id=peer_id, state=state, hb=hb, **kw)


def valid_body(route: str, size: int) -> bytes:
    """A request each route accepts (used to show the peer still serves that route)."""
    return {
        "gossip": lambda: encode_control("gossip", sender="tester", members=[]),
        "join": lambda: encode_control("join", member=entry()),
        "leave": lambda: encode_control("leave", member=entry(state="left", hb=2)),
        "params": lambda: encode_control("pull", sender=PUSHER),
        "pushpull": lambda: params_frame(np.zeros(size, np.float32)),
        "admin/fault": lambda: encode_control("fault", spec="none"),
        "admin/byzantine": lambda: encode_control("byzantine", kind=None),
        "admin/slowdown": lambda: encode_control("slowdown", factor=1.0),
    }[route]()


# Per-route bodies of the right message type but with fields of the wrong type or value.
WRONG_FIELDS: dict[str, list[tuple[str, bytes]]] = {
    "gossip": [("members not a list", encode_control("gossip", members="x"))],
    "join": [
        ("member not a list", encode_control("join", member=5)),
        ("member with bad fields", encode_control("join", member=[1, 2, 3, 4, 5, 6, 7])),
        ("member with NaN meta", encode_control("join", member=entry(meta={"x": math.nan}))),
    ],
    "leave": [("leave carrying an alive entry", encode_control("leave", member=entry()))],
    "params": [("type not a string", msgpack.packb({"version": 1, "type": 5}))],
    "admin/fault": [
        ("spec not a string", encode_control("fault", spec=5)),
        ("config value not a number", encode_control("fault", config={"drop": "x"})),
        ("unknown fault", encode_control("fault", config={"meteor": 1})),
        ("probability out of range", encode_control("fault", spec="drop=7")),
    ],
    "admin/byzantine": [
        ("kind not a string", encode_control("byzantine", kind=5)),
        ("unknown kind", encode_control("byzantine", kind="meteor")),
    ],
    "admin/slowdown": [
        ("factor not a number", encode_control("slowdown", factor="x")),
        ("factor NaN", encode_control("slowdown", factor=math.nan)),
        ("factor out of range", encode_control("slowdown", factor=1e9)),
    ],
}


def pushpull_cases(size: int) -> list[tuple[str, bytes]]:
    ok = np.zeros(size, np.float32)
    nan, inf = ok.copy(), ok.copy()
    nan[size // 2] = np.nan
    inf[0] = np.inf
    payload = ok.tobytes()
    good = params_frame(ok)
    f16_huge = np.full(size, 0x7C00, "<u2").tobytes()  # float16 +Inf: what 1e6 would become
    return [
        ("version 99", params_frame(ok, version=99)),
        ("header not a map", frame([1, 2, 3], payload)),
        ("header length past the cap", struct.pack(">I", 1 << 30) + b"\x80" * 60),
        ("shape not a list", frame(header_for(payload, "x"), payload)),
        ("step not an int", params_frame(ok, step="x")),
        ("dtype float64", params_frame(ok, dtype="float64")),
        ("unknown codec", params_frame(ok, codec="zip")),
        ("bad checksum", params_frame(ok, crc=b"\0\0\0\0")),
        # step 12345: a header length that leaves padding to fill (at 658 parameters, 62 bytes)
        (
            "non-zero padding",
            frame(header_for(payload, [size], step=12345), payload, pad_byte=b"\1"),
        ),
        ("truncated payload", good[: len(good) - 8]),
        ("truncated header", good[:10]),
        ("NaN parameter", params_frame(nan)),
        ("Inf parameter", params_frame(inf)),
        ("one parameter too many", params_frame(np.zeros(size + 1, np.float32))),
        ("one parameter too few", params_frame(np.zeros(size - 1, np.float32))),
        ("right size, wrong shape", params_frame(ok.reshape(size, 1))),
        ("negative dimension", frame(header_for(payload, [-size]), payload)),
        ("f16 values past its range", frame(header_for(f16_huge, [size], codec="f16"), f16_huge)),
    ]


@dataclass
class Case:
    name: str
    body: bytes
    status: int | tuple[int, ...] = 400


def cases_for(route: str, size: int, self_id: str) -> list[Case]:
    skew = 400 if route == "pushpull" else 426  # a push is a frame: a map is no push at all
    common = [
        Case("msgpack garbage", b"\xc1\xc1\xff\x00 not msgpack"),
        Case("empty body", b""),
        # another release's control message: 426, so that a joiner gives up at once (issue 31)
        Case("a map of version 99", msgpack.packb({"version": 99, "type": "gossip"}), skew),
        Case("not a map", msgpack.packb([1, 2, 3])),
    ]
    if route == "pushpull":
        return common + [Case(n, b) for n, b in pushpull_cases(size)]
    valid = valid_body(route, size)
    other = "join" if route != "join" else "gossip"
    specific = [
        Case("truncated message", valid[: len(valid) // 2]),
        Case("another route's message", valid_body(other, size)),
        *(Case(n, b) for n, b in WRONG_FIELDS[route]),
    ]
    if route == "join":
        itself = encode_control("join", member=entry(peer_id=self_id))
        # our id under another key: the id is not its key's, refused before anything else
        specific.append(Case("a joiner with this peer's own id", itself, status=400))
    if route not in ADMIN_ROUTES:  # admin bodies are capped at 64 KiB: that is their oversize
        over = encode_control("gossip", members=[], pad="x" * MAX_CONTROL_BYTES)
        # refused by its size before it is read: the route cap is a control message
        specific.append(Case("over the control-message cap", over, status=413))
    return common + specific
