"""Lossy codecs on the wire: round trips, sizes, and every malformed field refused clearly."""

from __future__ import annotations

import msgpack
import numpy as np
import pytest
from swarmnode.gossip.errors import WireError
from swarmnode.gossip.wire import frames as wire
from swarmnode.gossip.wire.frames import decode_params, encode_packed
from swarmnode.kernels import compress

pytestmark = pytest.mark.timeout(60)

N = 10_000


def vec(n: int = N) -> np.ndarray:
    return np.random.default_rng(3).standard_normal(n).astype(np.float32)


def frame(codec: str, x: np.ndarray | None = None, **extra: object) -> memoryview:
    x = vec() if x is None else x
    name, ratio = compress.parse_codec(codec)
    return encode_packed(compress.encode(x, name, ratio), sender="a", step=7, extra=extra)


@pytest.mark.parametrize(
    ("codec", "wire_name", "per_value"),
    [("fp16", "f16", 2.0), ("int8", "i8", 1.0 + 4 / 256), ("topk:0.01", "tk16", 0.04)],
)
def test_round_trip(codec: str, wire_name: str, per_value: float) -> None:
    x = vec()
    header, y = decode_params(frame(codec, x, ref_ver=3), expected_size=N)
    assert header["codec"] == wire_name and header["step"] == 7 and header["ref_ver"] == 3
    assert header["nbytes"] <= per_value * N + 4
    name, ratio = compress.parse_codec(codec)
    np.testing.assert_array_equal(y, compress.decode(compress.encode(x, name, ratio)))
    wire.validate_params(y, N)


def _rewrite(buf: memoryview, **changes: object) -> bytes:
    """The frame with header fields changed (payload and checksum kept)."""
    raw = bytes(buf)
    hlen = int.from_bytes(raw[:4], "big")
    header = msgpack.unpackb(raw[4 : 4 + hlen])
    header.update(changes)
    new = msgpack.packb(header, use_bin_type=True)
    pad = wire._payload_offset(len(new)) - 4 - len(new)
    payload = raw[wire._payload_offset(hlen) :]
    return len(new).to_bytes(4, "big") + new + bytes(pad) + payload


@pytest.mark.parametrize(
    ("codec", "changes", "message"),
    [
        ("int8", {"block": 0}, "'block' must be an integer"),
        ("int8", {"block": "x"}, "'block' must be an integer"),
        ("int8", {"block": 128}, "payload bytes, shape needs"),
        ("int8", {"chunk": 1 << 16}, "'chunk' must be 262144"),
        ("int8", {"chunk": None}, "'chunk' must be 262144"),
        ("topk:0.01", {"k": N}, "'k' must be an integer"),
        ("topk:0.01", {"k": 99}, "payload bytes, shape needs"),
        ("topk:0.01", {"codec": "zstd"}, "codec 'zstd' not supported"),
        ("fp16", {"shape": [N + 1]}, "payload bytes, shape needs"),
    ],
)
def test_bad_fields_are_refused(codec: str, changes: dict, message: str) -> None:
    with pytest.raises(WireError, match=message):
        decode_params(_rewrite(frame(codec), **changes))


def _payload_patched(buf: memoryview, at: int, value: bytes) -> bytes:
    """Corrupt the payload and fix the checksum, as a buggy or lying peer would."""
    raw = bytearray(buf)
    hlen = int.from_bytes(raw[:4], "big")
    off = wire._payload_offset(hlen)
    raw[off + at : off + at + len(value)] = value
    digest = wire.CHECKSUMS["xxh3"](memoryview(raw)[off:])
    return _rewrite(memoryview(raw), crc=digest)


SPARSE = pytest.mark.parametrize("sparse", [False, True])  # the refs layer's form: same checks


@SPARSE
def test_topk_counts_that_do_not_add_up_are_refused_before_allocating(sparse: bool) -> None:
    bad = _payload_patched(frame("topk:0.01"), 0, np.uint32(2**32 - 1).tobytes())
    with pytest.raises(WireError, match="add up to"):
        decode_params(bad, sparse=sparse)


@SPARSE
@pytest.mark.parametrize("n", [N, 70_000])
def test_topk_indices_out_of_order_or_range_refused(n: int, sparse: bool) -> None:
    # offsets start after the counts (one per 65536 values); offset 0 := 65535 breaks the order
    # (N) or, in the last, short bucket of 70 000 values, points past the end
    nb = -(-n // 65536)
    at = 4 * nb if n == N else 4 * nb + 2 * (compress.topk_count(n, 0.01) - 1)
    bad = _payload_patched(frame("topk:0.01", vec(n)), at, np.uint16(65535).tobytes())
    with pytest.raises(WireError, match="indices"):
        decode_params(bad, sparse=sparse)


@SPARSE
def test_topk_inf_value_refused(sparse: bool) -> None:
    k = compress.topk_count(N, 0.01)
    at = 4 + 2 * (k + k % 2)
    bad = _payload_patched(frame("topk:0.01"), at, np.float16(np.inf).tobytes())
    with pytest.raises(WireError, match="Inf or NaN"):
        decode_params(bad, sparse=sparse)


def test_sparse_topk_is_the_dense_decode_and_checks_its_size() -> None:
    _, dense = decode_params(frame("topk:0.01"))
    _, sparse = decode_params(frame("topk:0.01"), sparse=True)
    assert isinstance(sparse, compress.Sparse) and np.array_equal(sparse.dense(), dense)
    wire.validate_params(sparse, N)
    with pytest.raises(WireError, match="sparse parameters of"):
        wire.validate_params(sparse, N + 1)
    _, other = decode_params(frame("int8"), sparse=True)  # dense codecs stay dense
    assert isinstance(other, np.ndarray)


def test_f16_inf_refused() -> None:
    bad = _payload_patched(frame("fp16"), 0, np.float16(np.inf).tobytes())
    with pytest.raises(WireError, match="Inf or NaN"):
        decode_params(bad)


def test_i8_nan_scale_refused() -> None:
    bad = _payload_patched(frame("int8"), 0, np.float32(np.nan).tobytes())
    with pytest.raises(WireError, match="scale"):
        decode_params(bad)


def test_nan_input_decodes_to_a_refused_vector() -> None:
    x = vec()
    x[5] = np.nan
    with pytest.raises(WireError, match="NaN"):  # the half values refuse it, or the vector
        _, y = decode_params(frame("topk:0.5", x))
        wire.validate_params(y, N)


SEGS = ((100, 50), (1, 100), (49, 100))  # N values: two matrices and a bias


def lowrank_frame(x: np.ndarray | None = None, rank: int = 4) -> memoryview:
    x = vec() if x is None else x
    packed = compress.encode(x, "lowrank", rank, segs=SEGS)
    return encode_packed(packed, sender="a", step=7, extra={"ref_ver": 2})


def test_lowrank_round_trip() -> None:
    x = vec()
    header, y = decode_params(lowrank_frame(x), expected_size=N)
    assert header["codec"] == "lr16" and header["segs"] == [[100, 50, 4], [1, 100, 0], [49, 100, 4]]
    assert header["nbytes"] == 2 * (4 * 150 + 100 + 4 * 149)
    np.testing.assert_array_equal(y, compress.decode(compress.encode(x, "lowrank", 4, segs=SEGS)))
    wire.validate_params(y, N)


@pytest.mark.parametrize(
    ("segs", "message"),
    [
        ("x", "'segs' must be a list"),
        ([], "'segs' must be a list"),
        ([[100, 50, 4]] * 5000, "4096-byte cap"),  # the header cap comes first
        ([[100, 50]], "three integers"),
        ([[100, 50, True]], "three integers"),
        ([[100.0, 50, 4]], "three integers"),
        ([[0, 50, 4], [1, 100, 0], [49, 100, 4]], "rows, cols >= 1"),
        ([[100, 50, 65], [1, 100, 0], [49, 100, 4]], "r in"),
        ([[100, 50, -1], [1, 100, 0], [49, 100, 4]], "r in"),
        ([[100, 50, 40], [1, 100, 0], [49, 100, 4]], "does not compress"),
        ([[100, 50, 4], [1, 100, 0]], "tile 5100 values"),
        ([[100, 50, 4], [1, 100, 0], [49, 100, 4], [1, 1, 0]], "tile 10001 values"),
        ([[100, 50, 4], [1, 100, 0], [49, 100, 5]], "payload bytes, shape needs"),
    ],
)
def test_lowrank_bad_segments_are_refused(segs: object, message: str) -> None:
    with pytest.raises(WireError, match=message):
        decode_params(_rewrite(lowrank_frame(), segs=segs))


@pytest.mark.parametrize("bad", [np.inf, -np.inf, np.nan])
def test_lowrank_non_finite_factor_refused(bad: float) -> None:
    corrupt = _payload_patched(lowrank_frame(), 2 * 7, np.float16(bad).tobytes())
    with pytest.raises(WireError, match="non-finite"):
        decode_params(corrupt)


def test_lowrank_segment_count_is_bounded_before_parsing_them() -> None:
    from swarmnode.gossip.wire import codecs as wire_codecs
    from swarmnode.kernels import lowrank

    header = {"codec": "lr16", "segs": [[1, 1, 0]] * (lowrank.MAX_SEGS + 1)}
    with pytest.raises(WireError, match="'segs' must be a list of 1 to"):
        wire_codecs.payload_nbytes(header, lowrank.MAX_SEGS + 1)
