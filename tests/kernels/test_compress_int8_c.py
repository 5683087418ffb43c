"""The int8 C kernel (kernels/_int8.c): built wherever it can be, bit for bit the reference on
edge cases the numpy path does not match (NaN, Inf), safe on bad buffers, and the fallback."""

from __future__ import annotations

import importlib
import os
import sys

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp
from swarmnode.kernels import compress, compress_ref, int8_native
from swarmnode.kernels.errors import BackendError, ShapeError

from tests.build_env import extension_expected

pytestmark = pytest.mark.timeout(120)

CHUNK = compress.CHUNK
needs_c = pytest.mark.skipif(
    int8_native.module() is None, reason=f"int8 C kernel {int8_native.status()}"
)
# every copy of the loops this CPU runs: the baseline one too where AVX2 is the default
ISAS = pytest.mark.parametrize("isa", int8_native.isas() or ["none"])


@pytest.mark.skipif(
    not extension_expected(),
    reason="no C compiler or Python headers here: the numpy path runs (the kernel is optional)",
)
def test_the_c_kernel_is_built_where_it_can_be() -> None:
    """In CI, or wherever a compiler is, an install that silently skipped the extension (or left
    one built from an older source) fails here instead of running the slow path unnoticed."""
    mod = importlib.import_module("swarmnode.kernels._int8")
    assert mod.ABI == int8_native.ABI, "the extension predates kernels/_int8.c: run `make venv`"
    if os.environ.get(int8_native.ENV) != "0":
        assert int8_native.status() == "built"


def assert_c_is_the_reference(x: np.ndarray, block: int, isa: str) -> compress.Packed:
    """The C kernel's scales, q and decoded values against the reference's, as bytes."""
    q, scales = np.empty(x.size, np.int8), np.empty(-(-x.size // block), np.float32)
    int8_native.encode_into(x, block, scales, q, isa)
    ref = compress_ref.int8_encode(x, block)
    np.testing.assert_array_equal(scales.view(np.uint32), ref.parts["scales"].view(np.uint32))
    np.testing.assert_array_equal(q, ref.parts["q"])
    dec = np.empty(x.size, np.float32)
    int8_native.decode_into(q, scales, block, dec, isa)
    np.testing.assert_array_equal(
        dec.view(np.uint32), compress_ref.int8_decode(ref).view(np.uint32)
    )
    return compress.Packed("int8", x.size, {"scales": scales, "q": q}, block=block)


def with_blocks(n: int, block: int, fill: dict[int, np.ndarray | float], seed: int = 0):
    """A random vector whose blocks (columns of the first chunk) `fill` overwrites."""
    x = np.random.default_rng(seed).standard_normal(n).astype(np.float32)
    groups, _ = compress.int8_layout(min(n, CHUNK), block)
    col = np.arange(n) % groups
    for g, value in fill.items():
        x[(col == g) & (np.arange(n) < CHUNK)] = value
    return x, col


@needs_c
@ISAS
@pytest.mark.parametrize("n", [1, 3, 255, 257, 1023, CHUNK - 1, CHUNK + 1, CHUNK + 255])
@pytest.mark.parametrize("block", [4, 64, 256, 65536])
def test_c_odd_lengths_and_short_tails(n: int, block: int, isa: str) -> None:
    """Lengths that leave the last row of a chunk short, and last chunks shorter than a block."""
    x = np.random.default_rng(n).standard_normal(n).astype(np.float32) * np.float32(7)
    assert_c_is_the_reference(x, block, isa)


@needs_c
@ISAS
def test_c_zero_and_subnormal_blocks(isa: str) -> None:
    tiny = np.float32(compress.I8_MIN_AMAX)
    x, col = with_blocks(
        CHUNK + 77,
        256,
        {
            0: 0.0,
            1: -0.0,
            2: np.float32(1e-44),  # subnormal: 127 / max|x| is Inf, so q = 0
            3: np.nextafter(tiny, np.float32(0)),
            4: tiny,  # the least max|x| that quantises
            5: -np.float32(1e-39),
        },
    )
    p = assert_c_is_the_reference(x, 256, isa)
    first = np.arange(x.size) < CHUNK
    assert (p.parts["q"][first & np.isin(col, [0, 1, 2, 3, 5])] == 0).all()
    assert (p.parts["q"][first & (col == 4)] == 127).all()
    assert p.parts["scales"][1].view(np.uint32) == 0  # +0, as the reference's |x| makes it


@needs_c
@ISAS
def test_c_inf_and_nan_blocks_are_the_reference(isa: str) -> None:
    """The numpy path differs here (NumKong casts NaN to -128); the C kernel gives the
    reference's bits: scale Inf or NaN, every q of the block 0, the block decoded as NaN."""
    x, col = with_blocks(CHUNK + 999, 256, {}, seed=3)
    first = np.flatnonzero(np.arange(x.size) < CHUNK)
    at = {g: first[col[first] == g] for g in range(10, 16)}
    x[at[10][3]] = np.inf
    x[at[11][0]] = -np.inf
    x[at[12][5]] = np.nan
    x[at[13][9]] = -np.nan
    x[at[14][[1, 2]]] = [np.inf, np.nan]
    x[at[15]] = np.nan
    x[-1] = np.inf  # in the short last chunk too
    with np.errstate(invalid="ignore"):  # the reference's Inf * 0 and its cast of NaN
        p = assert_c_is_the_reference(x, 256, isa)
    scales = p.parts["scales"]
    assert np.isinf(scales[[10, 11]]).all() and np.isnan(scales[12:16]).all()
    bad = np.isin(col, range(10, 16)) & (np.arange(x.size) < CHUNK)
    assert (p.parts["q"][bad] == 0).all()
    assert np.isnan(compress.int8_decode(p, kernel="c")[bad]).all()
    with np.errstate(invalid="ignore"):  # Inf * 0
        assert np.isnan(compress.int8_decode(p, kernel="numpy")[bad]).all()  # either path


@needs_c
@ISAS
def test_c_nan_payloads_give_nan_scales_and_zero_codes(isa: str) -> None:
    """A NaN with a payload: its scale is the block's largest |NaN| bits, quieted (numpy's own
    pick among several varies with the array's shape, so the reference defines only "a NaN"),
    and its q are 0: round_i8 of the canonical NaN is 0 by luck, of these it is not."""

    def nan(bits: int) -> np.float32:
        return np.array(bits, np.uint32).view(np.float32)

    payloads = {3: 0x7FC000AB, 4: 0xFF80AB01, 5: 0x7FC00001}  # 4: negative and signalling
    x, col = with_blocks(CHUNK, 256, {}, seed=4)
    for g, bits in payloads.items():
        x[np.flatnonzero(col == g)[4]] = nan(bits)
    x[np.flatnonzero(col == 5)[9]] = nan(0x7FC00007)  # two payloads: the larger one wins
    q, scales = np.empty(x.size, np.int8), np.empty(CHUNK // 256, np.float32)
    int8_native.encode_into(x, 256, scales, q, isa)
    assert [hex(b) for b in scales[[3, 4, 5]].view(np.uint32)] == [
        "0x7fc000ab",
        "0x7fc0ab01",
        "0x7fc00007",
    ]
    assert (q[np.isin(col, list(payloads))] == 0).all()
    clean = ~np.isin(col, list(payloads))
    with np.errstate(invalid="ignore"):  # the reference's cast of NaN
        ref_q = compress_ref.int8_encode(x, 256).parts["q"]
    np.testing.assert_array_equal(q[clean], ref_q[clean])


FLOATS = st.one_of(
    st.floats(width=32, allow_nan=False),
    st.sampled_from([0.0, -0.0, np.inf, -np.inf, np.nan, -np.nan, 1e-44, 127.5, -127.5]),
)


@needs_c
@settings(max_examples=150, deadline=None)
@given(
    x=hnp.arrays(np.float32, st.integers(0, 2000), elements=FLOATS),
    block=st.sampled_from([1, 4, 8, 64, 256]),
    isa=st.sampled_from(int8_native.isas() or ["none"]),
)
def test_c_is_the_reference_on_any_floats(x: np.ndarray, block: int, isa: str) -> None:
    """Any float32 values (subnormals, huge ones, signed zeros, Inf, NaN) in any block size."""
    with np.errstate(all="ignore"):  # the reference's own NaN casts and Inf * 0
        assert_c_is_the_reference(x, block, isa)


@needs_c
def test_c_refuses_wrong_buffers_with_a_shape_error() -> None:
    p = compress.int8_encode(np.ones(1000, np.float32), 64, "c")
    short = compress.Packed("int8", 1000, {"q": p.parts["q"], "scales": p.parts["scales"][:-1]}, 64)
    with pytest.raises(ShapeError, match="scales"):
        compress.int8_decode(short, kernel="c")
    with pytest.raises(ShapeError, match="out"):
        compress.int8_decode(p, np.empty(500, np.float64), kernel="c")  # same bytes, wrong dtype
    with pytest.raises(ShapeError, match="out"):
        compress.int8_decode(p, np.empty(999, np.float32), kernel="c")
    with pytest.raises(ShapeError, match="ISA"):
        int8_native.decode_into(
            p.parts["q"], p.parts["scales"], 64, np.empty(1000, np.float32), "sse9"
        )


@needs_c
def test_c_reads_and_writes_unaligned_arrays() -> None:
    """A float32 array at an odd offset of a body (np.frombuffer) is copied, not misread."""
    x = np.random.default_rng(5).standard_normal(3000).astype(np.float32)
    raw = bytearray(x.nbytes + 1)
    odd = np.frombuffer(raw, np.float32, count=x.size, offset=1)
    odd[:] = x
    assert not odd.flags.aligned
    p = compress.int8_encode(x, 64, "c")
    np.testing.assert_array_equal(compress.int8_encode(odd, 64, "c").parts["q"], p.parts["q"])
    compress.int8_decode(p, odd, kernel="c")
    np.testing.assert_array_equal(odd, compress.int8_decode(p, kernel="c"))


@pytest.fixture
def reload_native():
    int8_native._load.cache_clear()
    yield
    int8_native._load.cache_clear()


def test_without_the_extension_the_numpy_path_runs(monkeypatch, reload_native) -> None:
    monkeypatch.setitem(sys.modules, "swarmnode.kernels._int8", None)  # import fails
    assert int8_native.module() is None and int8_native.status().startswith("not built")
    x = np.random.default_rng(9).standard_normal(CHUNK + 5).astype(np.float32)
    p = compress.int8_encode(x)
    np.testing.assert_array_equal(p.parts["q"], compress_ref.int8_encode(x).parts["q"])
    np.testing.assert_array_equal(compress.int8_decode(p), compress_ref.int8_decode(p))
    with pytest.raises(BackendError, match="not built"):
        compress.int8_encode(x, kernel="c")


def test_the_environment_switches_the_kernel_off(monkeypatch, reload_native) -> None:
    monkeypatch.setenv(int8_native.ENV, "0")
    assert int8_native.module() is None and "off" in int8_native.status()
    assert not compress._use_c("auto")


def test_an_unknown_kernel_is_refused() -> None:
    with pytest.raises(ShapeError, match="kernel"):
        compress.int8_encode(np.ones(4, np.float32), kernel="fast")
