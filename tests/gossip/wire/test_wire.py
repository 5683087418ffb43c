"""Parameter payload framing: round trips, zero-copy views, and every malformed frame refused."""

from __future__ import annotations

import msgpack
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from swarmnode.gossip.errors import WireError
from swarmnode.gossip.wire import frames as wire
from swarmnode.gossip.wire.frames import (
    WireCaps,
    decode_params,
    encode_params,
    validate_params,
)
from swarmnode.kernels.errors import SwarmnodeError

FUZZ = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _vec(n: int = 1000, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(n).astype(np.float32)


def _frame(header: dict, payload: bytes) -> bytes:
    """A hand-built frame, for headers `encode_params` would never write."""
    packed = msgpack.packb(header, use_bin_type=True)
    offset = -(-(4 + len(packed)) // wire.ALIGN) * wire.ALIGN
    return len(packed).to_bytes(4, "big") + packed + bytes(offset - 4 - len(packed)) + payload


def _header(**overrides: object) -> dict:
    base = {
        "version": 1,
        "type": "params",
        "sender": "p1",
        "step": 3,
        "dtype": "float32",
        "shape": [4],
        "codec": "raw",
        "nbytes": 16,
        "checksum": "xxh3",
        "crc": bytes(8),
    }
    base.update(overrides)
    return base


# --- round trips ---------------------------------------------------------------------------


def test_round_trip_returns_header_and_identical_array() -> None:
    vec = _vec()
    header, out = decode_params(encode_params(vec, sender="peer-a", step=42), expected_size=1000)
    assert np.array_equal(out, vec)
    assert out.dtype == np.float32 and out.shape == (1000,)
    assert header["sender"] == "peer-a" and header["step"] == 42
    assert header["dtype"] == "float32" and header["codec"] == "raw"
    assert header["shape"] == [1000] and header["nbytes"] == 4000


def test_decoded_array_is_an_aligned_zero_copy_view_of_the_buffer() -> None:
    data = bytes(encode_params(_vec(), sender="a", step=0))
    _, out = decode_params(data)
    holder = np.frombuffer(data, dtype=np.uint8)
    assert np.shares_memory(out, holder)  # no copy of the payload
    assert out.ctypes.data % 16 == holder.ctypes.data % 16  # 64-byte offset keeps alignment
    assert not out.flags.writeable  # a view into immutable bytes cannot be scribbled on


def test_frame_layout_is_length_header_padding_payload() -> None:
    vec = _vec(10)
    frame = bytes(encode_params(vec, sender="a", step=1))
    hlen = int.from_bytes(frame[:4], "big")
    header = msgpack.unpackb(frame[4 : 4 + hlen])
    offset = len(frame) - 40
    assert offset % wire.ALIGN == 0 and offset >= 4 + hlen
    assert frame[4 + hlen : offset] == bytes(offset - 4 - hlen)
    assert frame[offset:] == vec.tobytes()  # the raw buffer, never packed inside msgpack
    assert header["nbytes"] == 40


def test_f16_codec_halves_the_bytes_and_decodes_to_float32() -> None:
    vec = _vec(4096)
    raw = encode_params(vec, sender="a", step=0)
    half = encode_params(vec, sender="a", step=0, codec="f16")
    assert len(half) < len(raw) * 0.51
    header, out = decode_params(half, expected_size=4096)
    assert header["codec"] == "f16" and out.dtype == np.float32
    np.testing.assert_allclose(out, vec, rtol=1e-3, atol=1e-3)


@FUZZ
@given(
    shape=st.lists(st.integers(0, 6), min_size=0, max_size=4),
    codec=st.sampled_from(["raw", "f16"]),
    step=st.integers(0, 2**40),
    as_bytes=st.booleans(),
)
def test_round_trip_any_shape(shape: list[int], codec: str, step: int, as_bytes: bool) -> None:
    arr = np.arange(int(np.prod(shape)), dtype=np.float32).reshape(shape)
    data = encode_params(arr, sender="s", step=step, codec=codec)
    header, out = decode_params(bytes(data) if as_bytes else data)
    assert out.shape == tuple(shape) and header["step"] == step
    np.testing.assert_array_equal(out, arr)  # small integers are exact in float16 too


def test_encode_accepts_non_contiguous_input() -> None:
    base = _vec(200).reshape(10, 20)
    view = base[:, ::2]
    _, out = decode_params(encode_params(view, sender="a", step=0))
    np.testing.assert_array_equal(out, view)


def test_encode_refuses_non_float32_and_unknown_codec() -> None:
    with pytest.raises(WireError, match="float32"):
        encode_params(np.zeros(3, dtype=np.float64), sender="a", step=0)
    with pytest.raises(WireError, match="codec"):
        encode_params(np.zeros(3, dtype=np.float32), sender="a", step=0, codec="zstd")
    with pytest.raises(WireError, match="array"):
        encode_params([1.0, 2.0], sender="a", step=0)


def test_wire_error_is_a_swarmnode_error() -> None:
    assert issubclass(WireError, SwarmnodeError)


# --- malformed frames ------------------------------------------------------------------------


def test_every_truncation_is_refused() -> None:
    data = bytes(encode_params(_vec(50), sender="a", step=0))
    for cut in range(len(data)):
        with pytest.raises(WireError):
            decode_params(data[:cut])


def test_trailing_bytes_are_refused() -> None:
    data = bytes(encode_params(_vec(50), sender="a", step=0))
    with pytest.raises(WireError, match="account for"):
        decode_params(data + b"\0\0\0\0")


def test_flipped_payload_byte_fails_the_checksum() -> None:
    data = bytearray(encode_params(_vec(50), sender="a", step=0))
    data[-7] ^= 0x10
    with pytest.raises(WireError, match="checksum"):
        decode_params(bytes(data))


def test_frames_carry_xxh3_and_an_unknown_checksum_is_refused(monkeypatch) -> None:
    vec = _vec(50)
    header, got = decode_params(encode_params(vec, sender="a", step=0))
    assert header["checksum"] == "xxh3" and len(header["crc"]) == 8
    np.testing.assert_array_equal(got, vec)
    monkeypatch.setitem(wire.CHECKSUMS, "crc32", lambda view: bytes(4))
    monkeypatch.setattr(wire, "SEND_CHECKSUM", "crc32")
    data = encode_params(vec, sender="a", step=0)
    monkeypatch.delitem(wire.CHECKSUMS, "crc32")
    with pytest.raises(WireError, match="checksum 'crc32' not supported"):
        decode_params(data)


def test_nonzero_padding_is_refused() -> None:
    data = bytearray(encode_params(_vec(50), sender="a", step=0))
    hlen = int.from_bytes(data[:4], "big")
    if (4 + hlen) % wire.ALIGN == 0:
        pytest.skip("no padding in this frame")
    data[4 + hlen] = 1
    with pytest.raises(WireError, match="padding"):
        decode_params(bytes(data))


@pytest.mark.parametrize(
    ("overrides", "match"),
    [
        ({"version": 2}, "version"),
        ({"type": "gossip"}, "params"),
        ({"dtype": "float64"}, "dtype"),
        ({"dtype": "object"}, "dtype"),
        ({"codec": "pickle"}, "codec"),
        ({"checksum": "none"}, "checksum"),
        ({"shape": [2, -2]}, "dimension"),
        ({"shape": [True, 4]}, "dimension"),
        ({"shape": [4.0]}, "dimension"),
        ({"shape": [1, 1, 1, 1, 4]}, "dimensions"),
        ({"nbytes": 20}, "payload bytes"),
        ({"step": "3"}, "step"),
        ({"sender": None}, "sender"),
        ({"crc": 0}, "crc"),
    ],
)
def test_bad_header_fields_are_refused(overrides: dict, match: str) -> None:
    with pytest.raises(WireError, match=match):
        decode_params(_frame(_header(**overrides), bytes(16)))


def test_missing_header_field_is_refused() -> None:
    header = _header()
    del header["shape"]
    with pytest.raises(WireError, match="shape"):
        decode_params(_frame(header, bytes(16)))


@pytest.mark.timeout(10)
def test_huge_declared_shape_is_refused_before_any_allocation() -> None:
    # 2**60 float32 would be 4 EiB: refused by the caps, never handed to numpy.
    header = _header(shape=[2**30, 2**30], nbytes=2**62)
    with pytest.raises(WireError, match="cap"):
        decode_params(_frame(header, bytes(16)))
    # Under the caps but not backed by bytes: refused by the length check, still no allocation.
    with pytest.raises(WireError, match="account for"):
        decode_params(_frame(_header(shape=[1 << 20], nbytes=4 << 20), bytes(16)))


def test_caps_are_configurable() -> None:
    data = encode_params(_vec(100), sender="a", step=0)
    with pytest.raises(WireError, match="cap"):
        decode_params(data, caps=WireCaps(max_elements=99))
    with pytest.raises(WireError, match="cap"):
        decode_params(data, caps=WireCaps(max_payload_bytes=399))
    with pytest.raises(WireError, match="cap"):
        decode_params(data, caps=WireCaps(max_header_bytes=16))


def test_header_length_beyond_cap_or_buffer_is_refused() -> None:
    with pytest.raises(WireError, match="cap"):
        decode_params((1 << 31).to_bytes(4, "big") + bytes(100))
    with pytest.raises(WireError, match="overruns"):
        decode_params((200).to_bytes(4, "big") + bytes(100))


@pytest.mark.parametrize("junk", [b"\xc1", msgpack.packb([1, 2, 3]), msgpack.packb("params")])
def test_header_that_is_not_a_map_is_refused(junk: bytes) -> None:
    data = len(junk).to_bytes(4, "big") + junk
    with pytest.raises(WireError, match="header"):
        decode_params(data)


def test_expected_size_mismatch_is_refused() -> None:
    with pytest.raises(WireError, match="this model has 999"):
        decode_params(encode_params(_vec(1000), sender="a", step=0), expected_size=999)


@FUZZ
@given(data=st.binary(max_size=300))
def test_random_bytes_never_escape_as_another_error(data: bytes) -> None:
    try:
        decode_params(data)
    except WireError:
        pass


@FUZZ
@given(pos=st.integers(0, 10_000), value=st.integers(1, 255), seed=st.integers(0, 3))
def test_any_single_byte_corruption_is_detected(pos: int, value: int, seed: int) -> None:
    data = bytearray(encode_params(_vec(64, seed), sender="a", step=seed))
    pos %= len(data)
    data[pos] ^= value
    try:
        header, out = decode_params(bytes(data), expected_size=64)
    except WireError:
        return
    # Only the header's free-form fields (sender, step) can change undetected.
    np.testing.assert_array_equal(out, _vec(64, seed))
    assert header["nbytes"] == 256


# --- validate_params ---------------------------------------------------------------------------


def test_validate_accepts_a_finite_float32_vector_including_huge_values() -> None:
    vec = _vec(100)
    validate_params(vec, 100)
    vec[3] = 3e38  # squares overflow float32: the fast check falls back to an exact count
    validate_params(vec, 100)


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_validate_rejects_non_finite_values(bad: float) -> None:
    vec = _vec(10_000_000 // 1000)
    vec[-1] = bad
    with pytest.raises(WireError, match="1 NaN/Inf"):
        validate_params(vec, vec.size)


def test_validate_rejects_wrong_size_dtype_shape_and_non_arrays() -> None:
    with pytest.raises(WireError, match="shape"):
        validate_params(_vec(99), 100)
    with pytest.raises(WireError, match="float32"):
        validate_params(np.zeros(100), 100)
    with pytest.raises(WireError, match="shape"):
        validate_params(np.zeros((100, 1), dtype=np.float32), 100)  # would broadcast to (d, d)
    with pytest.raises(WireError, match="array"):
        validate_params([0.0] * 100, 100)


def test_decode_then_validate_rejects_a_nan_payload_with_a_valid_checksum() -> None:
    vec = _vec(100)
    vec[50] = np.nan
    _, out = decode_params(encode_params(vec, sender="byz", step=0), expected_size=100)
    with pytest.raises(WireError, match="NaN"):
        validate_params(out, 100)


@pytest.mark.gpu
def test_encode_and_validate_cupy_arrays() -> None:
    cupy = pytest.importorskip("cupy")
    vec = cupy.asarray(_vec(1000))
    _, out = decode_params(encode_params(vec, sender="g", step=0))
    np.testing.assert_array_equal(out, vec.get())
    validate_params(vec, 1000)
    vec[7] = cupy.nan
    with pytest.raises(WireError, match="NaN"):
        validate_params(vec, 1000)


@pytest.mark.parametrize("step", [0, 1, 127, 128, 70_000, 2**40, 2**64 - 2])
def test_a_frame_filled_in_place_decodes_like_an_encoded_one(step: int) -> None:
    vec = _vec(300)

    def fill(payload: np.ndarray) -> int:
        payload[...] = vec
        return step

    header, got = decode_params(wire.encode_into_frame(vec.size, fill, sender="a"))
    assert header["step"] == step and header["sender"] == "a"
    np.testing.assert_array_equal(got, vec)
    ref, _ = decode_params(encode_params(vec, sender="a", step=step))
    assert {k: v for k, v in header.items() if k != "crc"} == {
        k: v for k, v in ref.items() if k != "crc"
    }


def test_a_step_beyond_the_header_slot_is_refused() -> None:
    with pytest.raises(WireError, match="step"):
        wire.encode_into_frame(4, lambda payload: -1, sender="a")


# --- a header read once, ahead of the payload ------------------------------------------------


def test_a_header_read_ahead_decodes_its_frame_as_a_plain_decode_does() -> None:
    vec = _vec(500)
    frame = encode_params(vec, sender="p7", step=9, extra={"ref": "full"})
    head = wire.read_header(frame)
    assert (head.sender, head.step, head.codec, head.shape) == ("p7", 9, "raw", (500,))
    assert head.fields["ref"] == "full" and "_header_len" not in head.fields
    fields, got = decode_params(frame, header=head)
    plain_fields, plain = decode_params(frame)
    assert fields == plain_fields == head.fields
    assert fields is not head.fields  # a copy: the header object stays as it was read
    np.testing.assert_array_equal(got, plain)


def test_a_header_read_ahead_still_has_its_payload_checked() -> None:
    frame = bytearray(encode_params(_vec(64), sender="a", step=0))
    head = wire.read_header(frame)
    frame[-1] ^= 1
    with pytest.raises(WireError, match="checksum"):
        decode_params(frame, header=head)


def test_a_header_of_another_frame_is_refused() -> None:
    one = encode_params(_vec(64), sender="a", step=1)
    other = encode_params(_vec(64), sender="b", step=1)
    with pytest.raises(AssertionError, match="another frame"):
        decode_params(other, header=wire.read_header(one))


def test_a_header_that_does_not_parse_is_refused_by_read_header() -> None:
    with pytest.raises(WireError):
        wire.read_header(_frame(_header(codec="zip"), bytes(16)))
