"""topk2 frames (`tk2`) on the wire: round trip, bytes, every header field checked before the
payload, and a payload fuzzed byte by byte (checksum fixed, as a lying insider would) that gives
a valid sparse delta or a `WireError`, never a crash."""

from __future__ import annotations

import msgpack
import numpy as np
import pytest
from swarmnode.gossip.errors import WireError
from swarmnode.gossip.wire import frames as wire
from swarmnode.gossip.wire.frames import decode_params, encode_packed
from swarmnode.kernels import compress, topk2

pytestmark = pytest.mark.timeout(60)

N = 3 * topk2.CHUNK2 + 1000  # three whole chunks and a short one


def vec(n: int = N) -> np.ndarray:
    return np.random.default_rng(5).standard_normal(n).astype(np.float32)


def frame(x: np.ndarray | None = None, density: float = 0.07) -> memoryview:
    x = vec() if x is None else x
    return encode_packed(compress.encode(x, "topk2", density), sender="a", step=3)


def _rewrite(buf: bytes | memoryview, **changes: object) -> bytes:
    raw = bytes(buf)
    hlen = int.from_bytes(raw[:4], "big")
    header = msgpack.unpackb(raw[4 : 4 + hlen])
    header.update(changes)
    new = msgpack.packb(header, use_bin_type=True)
    pad = wire._payload_offset(len(new)) - 4 - len(new)
    return len(new).to_bytes(4, "big") + new + bytes(pad) + raw[wire._payload_offset(hlen) :]


def _fix_crc(raw: bytearray) -> bytes:
    hlen = int.from_bytes(raw[:4], "big")
    digest = wire.CHECKSUMS["xxh3"](memoryview(raw)[wire._payload_offset(hlen) :])
    return _rewrite(memoryview(raw), crc=digest)


@pytest.mark.parametrize("sparse", [False, True])
def test_round_trip_dense_and_sparse(sparse: bool) -> None:
    x = vec()
    header, y = decode_params(frame(x), expected_size=N, sparse=sparse)
    assert header["codec"] == "tk2" and header["chunk"] == topk2.CHUNK2
    assert header["kc"] == topk2.chunk_keep(0.07)
    sizes = topk2.part_nbytes(N, header["kc"], header["rice"], header["ubits"])
    assert header["nbytes"] == sum(sizes)
    assert 8 * header["nbytes"] / N < 0.64  # >= 50x fewer than float32
    want = compress.sparse(compress.encode(x, "topk2", 0.07))
    assert isinstance(y, compress.Sparse) == sparse
    got = y if sparse else compress.Sparse(N, np.flatnonzero(y), y[np.flatnonzero(y)])
    np.testing.assert_array_equal(got.idx, want.idx)
    np.testing.assert_array_equal(got.values, want.values)
    wire.validate_params(y, N)


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"kc": 0}, "'kc' must be an integer"),
        ({"kc": topk2.MAX_KEEP + 1}, "'kc' must be an integer"),
        ({"kc": 1.5}, "'kc' must be an integer"),
        ({"kc": True}, "'kc' must be an integer"),
        ({"kc": 300}, r"payload bytes, shape needs|unary stream"),  # sizes may pad alike
        ({"rice": 12}, "rice must be an integer"),
        ({"rice": "3"}, "rice must be an integer"),
        ({"ubits": 0}, "ubits must be an integer"),
        ({"ubits": N + 1}, "ubits must be an integer"),
        ({"ubits": 10**12}, "ubits must be an integer"),
        ({"chunk": 8192}, "'chunk' must be 4096"),
        ({"chunk": None}, "'chunk' must be 4096"),
        ({"shape": [N + 5000]}, r"payload bytes, shape needs|ubits"),
    ],
)
def test_bad_fields_are_refused(changes: dict, message: str) -> None:
    with pytest.raises(WireError, match=message):
        decode_params(_rewrite(frame(), **changes))


def test_a_nan_level_is_refused_with_the_codec_named() -> None:
    raw = bytearray(frame())
    off = wire._payload_offset(int.from_bytes(raw[:4], "big"))
    raw[off + 4 : off + 8] = np.float32(np.nan).tobytes()
    with pytest.raises(WireError, match="tk2 payload: topk2 levels"):
        decode_params(_fix_crc(raw), sparse=True)


def test_fuzzed_payloads_give_a_valid_delta_or_a_wire_error() -> None:
    rng = np.random.default_rng(11)
    good = bytearray(frame())
    off = wire._payload_offset(int.from_bytes(good[:4], "big"))
    outcomes = {"refused": 0, "accepted": 0}
    for _ in range(200):
        raw = bytearray(good)
        for at in off + rng.integers(0, len(raw) - off, size=rng.integers(1, 8)):
            raw[int(at)] = int(rng.integers(0, 256))
        try:
            _, s = decode_params(_fix_crc(raw), expected_size=N, sparse=True)
            wire.validate_params(s, N)
        except WireError:
            outcomes["refused"] += 1
            continue
        outcomes["accepted"] += 1
        assert np.unique(s.idx).size == s.idx.size and 0 <= s.idx.min() and s.idx.max() < N
    assert outcomes["refused"] and outcomes["accepted"]  # both kinds of bytes were met
