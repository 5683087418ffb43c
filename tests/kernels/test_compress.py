"""The CPU codecs against their numpy references: error bounds, exact shapes, odd sizes, bits,
bad input (the int8 C kernel beyond these: test_compress_int8_c.py)."""

from __future__ import annotations

import numpy as np
import pytest
from swarmnode.kernels import compress, compress_ref, int8_native
from swarmnode.kernels.errors import ShapeError

pytestmark = pytest.mark.timeout(60)

SIZES = [0, 1, 7, 255, 256, 257, compress.CHUNK - 1, compress.CHUNK + 300, 3 * compress.CHUNK]


def vec(n: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(n).astype(np.float32)


@pytest.mark.parametrize("n", SIZES)
def test_fp16_round_trip(n: int) -> None:
    x = vec(n)
    p = compress.fp16_encode(x)
    assert p.nbytes == 2 * n
    np.testing.assert_allclose(compress.decode(p), x, rtol=1e-3, atol=1e-6)


def test_fp16_saturates_instead_of_inf() -> None:
    x = np.array([1e6, -1e6, 3.0], dtype=np.float32)
    y = compress.decode(compress.fp16_encode(x))
    assert np.isfinite(y).all()
    assert y[0] == compress.F16_MAX and y[1] == -compress.F16_MAX


@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("block", [64, 256])
def test_int8_error_is_half_a_step(n: int, block: int) -> None:
    x = vec(n, 1) * np.float32(3)
    p = compress.int8_encode(x, block)
    assert p.parts["scales"].size == -(-n // block)
    assert p.nbytes == n + 4 * (-(-n // block))
    y = compress.decode(p)
    if n:
        idx = compress.int8_scale_index(n, block)
        assert np.bincount(idx).max() <= block
        bound = p.parts["scales"][idx] / 2 + 1e-6
        assert (np.abs(y - x) <= bound * 1.001).all()


def test_int8_zero_block_stays_zero() -> None:
    x = np.zeros(600, dtype=np.float32)
    x[300] = 2.0
    y = compress.decode(compress.int8_encode(x, 256))
    np.testing.assert_array_equal(y, x)


@pytest.mark.parametrize("n", [1, 10, 1000, compress.CHUNK + 5, 3 * compress.TOPK_BUCKET + 1])
def test_topk_keeps_the_largest(n: int) -> None:
    x = vec(n, 2)
    p = compress.topk_encode(x, 0.1)
    k = compress.topk_count(n, 0.1)
    idx = compress.topk_indices(p)
    assert p.k == k and idx.size == k and p.nbytes == 4 * k + 4 * compress.topk_buckets(n)
    assert (np.diff(idx) > 0).all()
    y = compress.decode(p)
    kept = np.abs(x[idx]).min()
    rest = np.delete(np.abs(x), idx)
    assert rest.size == 0 or rest.max() <= kept
    np.testing.assert_array_equal(y[idx], x[idx].astype(np.float16).astype(np.float32))


@pytest.mark.parametrize(
    ("spec", "want"),
    [
        ("none", ("none", 0.0)),
        ("fp16", ("fp16", 0.0)),
        ("int8", ("int8", 0.0)),
        ("topk:0.01", ("topk", 0.01)),
    ],
)
def test_parse_codec(spec: str, want: tuple[str, float]) -> None:
    assert compress.parse_codec(spec) == want


@pytest.mark.parametrize("spec", ["gzip", "topk", "topk:0", "topk:2", "topk:x", "int8:3"])
def test_parse_codec_refuses(spec: str) -> None:
    with pytest.raises(ShapeError):
        compress.parse_codec(spec)


@pytest.mark.parametrize("bad", [np.zeros(4, np.float64), np.zeros((2, 2), np.float32)])
def test_encoders_refuse_bad_input(bad: np.ndarray) -> None:
    for codec in ("fp16", "int8", "topk"):
        with pytest.raises(ShapeError):
            compress.encode(bad, codec, 0.5)


@pytest.mark.parametrize("scale", [1e-6, 1e-3, 1.0, 1e4, 1e5])
def test_fp16_is_the_reference_bit_for_bit(scale: float) -> None:
    x = vec(compress.CHUNK + 200_001, 5) * np.float32(scale)  # 1e5: saturation in some chunks
    ours = compress.fp16_encode(x).parts["values"]
    ref = compress_ref.fp16_encode(x).parts["values"]
    np.testing.assert_array_equal(ours.view(np.uint16), ref.view(np.uint16))
    p = compress.Packed("fp16", x.size, {"values": ref})
    np.testing.assert_array_equal(compress.fp16_decode(p), compress_ref.fp16_decode(p))


def test_fp16_rounds_every_float16_boundary_like_numpy() -> None:
    """Every float32 from below float16's subnormals to past its range (a stride through the
    bit patterns that lands on ties, subnormals, and the 65504 / 65520 edge)."""
    bits = np.arange(0x33000000, 0x47800000, 7, dtype=np.uint32)
    x = np.concatenate([bits.view(np.float32), -bits.view(np.float32)])
    ours = compress.fp16_encode(x).parts["values"].view(np.uint16)
    np.testing.assert_array_equal(ours, compress_ref.fp16_encode(x).parts["values"].view(np.uint16))


# both CPU kernels, wherever they run: the C one only where it was built (test_compress_int8_c.py
# fails where it could have been built and was not)
INT8_KERNELS = [
    "numpy",
    pytest.param(
        "c",
        marks=pytest.mark.skipif(
            int8_native.module() is None, reason=f"int8 C kernel {int8_native.status()}"
        ),
    ),
]


def assert_int8_is_the_reference(x: np.ndarray, block: int, kernel: str) -> None:
    """Scales and decoded values compared as bits: a -0 scale where the reference has +0 is a
    difference (assert_array_equal would call them equal)."""
    ours, ref = compress.int8_encode(x, block, kernel), compress_ref.int8_encode(x, block)
    np.testing.assert_array_equal(
        ours.parts["scales"].view(np.uint32), ref.parts["scales"].view(np.uint32)
    )
    np.testing.assert_array_equal(ours.parts["q"], ref.parts["q"])
    dec, dec_ref = compress.int8_decode(ours, kernel=kernel), compress_ref.int8_decode(ref)
    np.testing.assert_array_equal(dec.view(np.uint32), dec_ref.view(np.uint32))


@pytest.mark.parametrize("kernel", INT8_KERNELS)
@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("block", [64, 256])
def test_int8_is_the_reference_bit_for_bit(n: int, block: int, kernel: str) -> None:
    x = vec(n, 7) * np.float32(5)
    x[: n // 3] *= np.float32(1e-4)  # blocks of very different scales
    assert_int8_is_the_reference(x, block, kernel)


@pytest.mark.parametrize("kernel", INT8_KERNELS)
@pytest.mark.parametrize("n", [1000, compress.CHUNK + 300])
@pytest.mark.parametrize("block", [1, 2, 4096, compress.CHUNK])
def test_int8_odd_blocks_are_the_reference(n: int, block: int, kernel: str) -> None:
    """Blocks at the ends of the range: one value per block (a tile of one copy), and blocks
    so long that a chunk has few groups (many copies per tile)."""
    assert_int8_is_the_reference(vec(n, 3), block, kernel)


@pytest.mark.parametrize("kernel", INT8_KERNELS)
def test_int8_signs_and_zeros_are_the_reference(kernel: str) -> None:
    """Block max |x| is max(max x, -min x): blocks of only negatives, of -0 and +0 (the scale
    must be +0, as the reference's |x| makes it), of values at and below `I8_MIN_AMAX`."""
    n = 2 * compress.CHUNK + 999
    x = vec(n, 11)
    groups, _ = compress.int8_layout(compress.CHUNK, 256)
    col, tiny = np.arange(n) % groups, np.float32(compress.I8_MIN_AMAX)
    x[col == 3] = -np.abs(x[col == 3])
    x[col == 4] = -0.0
    x[col == 5] = np.where(np.arange(n)[col == 5] % 2, 0.0, -0.0)
    x[col == 6] = 0.0
    x[np.flatnonzero(col == 6)[7]] = np.float32(-1e-30)
    x[col == 7] = np.float32(1e-44) * np.sign(x[col == 7])  # subnormal: 127 / max|x| is Inf
    x[col == 8] = np.nextafter(tiny, np.float32(0)) * np.sign(x[col == 8])
    x[col == 9] = tiny * np.sign(x[col == 9])  # the least max|x| that quantises
    assert_int8_is_the_reference(x, 256, kernel)
    p = compress.int8_encode(x, 256, kernel)
    q, full = p.parts["q"], np.arange(n) < 2 * compress.CHUNK  # the tail has other groups
    assert (q[full & ((col == 7) | (col == 8))] == 0).all()
    assert (np.abs(q[full & (col == 9)]) == 127).all()
    assert q.min() >= -127


def test_i8_min_amax_is_the_edge_of_a_finite_inverse() -> None:
    a = np.float32(compress.I8_MIN_AMAX)
    with np.errstate(over="ignore"):
        assert np.isfinite(np.float32(127) / a)
        assert np.isinf(np.float32(127) / np.nextafter(a, np.float32(0)))


def test_fp16_decode_refuses_inf_and_nan() -> None:
    h = np.array([1.0, np.inf, np.nan], dtype=np.float16)
    for bad in (h, h[:2], h[2:]):
        with pytest.raises(ShapeError, match="Inf or NaN"):
            compress.fp16_decode(compress.Packed("fp16", bad.size, {"values": bad}))


def test_fp16_encodes_an_all_nan_chunk_without_crashing() -> None:
    x = np.full(1000, np.nan, dtype=np.float32)  # NumKong's minmax finds no number in it
    assert np.isnan(compress.fp16_encode(x).parts["values"]).all()
