"""topk2 (chunked top-k, 2-bit values): what it keeps, what it sends, its bytes, and a decoder
that refuses every malformed part a hostile sender could write."""

from __future__ import annotations

import numpy as np
import pytest
from swarmnode.kernels import compress, topk2
from swarmnode.kernels.errors import ShapeError

pytestmark = pytest.mark.timeout(60)

C = topk2.CHUNK2
SIZES = [1, 5, C - 1, C, C + 1, 3 * C + 777]


def vec(n: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(n).astype(np.float32)


def reference(x: np.ndarray, density: float) -> tuple[np.ndarray, np.ndarray]:
    """The plain definition, one chunk at a time: (kept places, decoded values)."""
    kc = topk2.chunk_keep(density)
    idx, vals = [], []
    for lo in range(0, x.size, C):
        seg = x[lo : lo + C]
        k = -(-kc * seg.size // C)  # a short last chunk keeps its share
        keep = np.sort(np.argsort(-np.abs(seg), kind="stable")[:k])
        mags = np.abs(seg[keep]).astype(np.float64)
        hi = mags >= mags.mean()
        lvl_hi = mags[hi].mean()
        lvl_lo = mags[~hi].mean() if (~hi).any() else lvl_hi
        level = np.where(hi, np.float32(lvl_hi), np.float32(lvl_lo))
        idx.append(lo + keep)
        vals.append(np.where(seg[keep] < 0, -level, level).astype(np.float32))
    return np.concatenate(idx), np.concatenate(vals)


@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("density", [0.01, 0.03, 0.5])
def test_keeps_each_chunks_largest_with_two_levels(n: int, density: float) -> None:
    x = vec(n)
    s = compress.sparse(compress.encode(x, "topk2", density))
    idx, vals = reference(x, density)
    np.testing.assert_array_equal(s.idx, idx)  # distinct random values: no ties to break
    np.testing.assert_allclose(s.values, vals, rtol=1e-6)
    assert (np.diff(s.idx) > 0).all() and s.values.dtype == np.float32


def test_decode_is_the_sparse_form_densely() -> None:
    p = compress.encode(vec(3 * C + 5), "topk2", 0.03)
    np.testing.assert_array_equal(compress.decode(p), compress.sparse(p).dense())


def test_bits_per_parameter_meet_fifty_times_fewer_than_float32() -> None:
    n = 1_000_000
    for density, most in ((0.03, 0.30), (0.07, 0.60)):
        p = compress.encode(vec(n), "topk2", density)
        bits = 8 * p.nbytes / n
        # 2 bits a value, ~log2(4096 / kc) + 1.5 a Rice-coded gap, 64 a chunk, the words' padding
        assert bits <= most, (density, bits)
        assert p.nbytes == sum(topk2.part_nbytes(n, p.k, p.meta["rice"], p.meta["ubits"]))
    assert 32 / bits >= 50  # goal 4 at density 0.07


def test_rice_coded_places_cost_under_half_of_twelve_bits() -> None:
    p = compress.encode(vec(400_000), "topk2", 0.07)
    kept = topk2.layout(p.n, p.k)[1]
    place_bits = 8 * (p.parts["rem"].nbytes + p.parts["unary"].nbytes) / kept
    assert place_bits < 6.0  # fixed 12-bit places took 12


def test_error_feedback_sends_everything_in_time() -> None:
    """Encoding what is left each round (the refs layer's x - sent) drives the residual to 0:
    the levels round off and the places left out are sent later, not lost."""
    x = vec(2 * C + 100, seed=4)
    sent = np.zeros_like(x)
    norms = []
    for _ in range(400):
        sent += compress.decode(compress.encode(x - sent, "topk2", 0.03))
        norms.append(float(np.linalg.norm(x - sent)))
    assert norms[-1] < 0.02 * float(np.linalg.norm(x))
    assert norms[-1] < norms[40] < norms[0]


def test_zeros_and_empty() -> None:
    z = compress.sparse(compress.encode(np.zeros(C + 3, np.float32), "topk2", 0.03))
    assert not z.values.any() and np.isfinite(z.values).all()
    e = compress.encode(np.zeros(0, np.float32), "topk2", 0.03)
    assert e.nbytes == 0 and compress.sparse(e).idx.size == 0


@pytest.mark.parametrize("bad", [np.nan, np.inf])
def test_non_finite_input_is_refused_by_the_encoder(bad: float) -> None:
    x = vec(C)
    x[7] = bad
    with pytest.raises(ShapeError, match="Inf or NaN"):
        compress.encode(x, "topk2", 0.03)


@pytest.mark.parametrize("spec", ["topk2", "topk2:", "topk2:x", "topk2:0", "topk2:0.6"])
def test_bad_specs_are_refused(spec: str) -> None:
    with pytest.raises(ShapeError, match="topk2"):
        compress.parse_codec(spec)


# --- a hostile frame -------------------------------------------------------------------------


def packed(n: int = 2 * C + 300) -> compress.Packed:
    p = compress.encode(vec(n), "topk2", 0.07)
    p.parts = {k: v.copy() for k, v in p.parts.items()}
    return p


def _with_gaps(p: compress.Packed, gaps: np.ndarray) -> compress.Packed:
    """p with its places replaced by these gaps (same Rice parameter), as a liar would."""
    rice = p.meta["rice"]
    rem, unary, ubits = topk2._rice_streams(gaps, rice)
    sizes = topk2.part_nbytes(p.n, p.k, rice, ubits)
    parts = {
        **p.parts,
        "rem": topk2._padded(rem, sizes[2]),
        "unary": topk2._padded(unary, sizes[3]),
    }
    return compress.Packed("topk2", p.n, parts, k=p.k, meta={"rice": rice, "ubits": ubits})


def _gaps_of(p: compress.Packed) -> np.ndarray:
    kept = topk2.layout(p.n, p.k)[1]
    return topk2._read_gaps(p.parts["rem"], p.parts["unary"], kept, p.meta["rice"], p.meta["ubits"])


def test_the_gaps_read_back_are_the_ones_sent() -> None:
    p = packed()
    s = compress.sparse(p)
    first = np.searchsorted(s.idx, np.arange(0, p.n, C))  # each chunk's first value
    want = np.diff(s.idx, prepend=-1) - 1
    want[first] = s.idx[first] % C
    np.testing.assert_array_equal(_gaps_of(p), want)


@pytest.mark.parametrize("n", [2 * C + 300, 2 * C])  # a short last chunk, and none
def test_a_place_past_its_chunk_is_refused(n: int) -> None:
    p = packed(n)
    kc = p.k
    for chunk_end in (kc - 1, topk2.layout(n, kc)[1] - 1):  # chunk 0's last gap; the frame's
        gaps = _gaps_of(p).copy()
        gaps[chunk_end] += C
        with pytest.raises(ShapeError, match="past its chunk"):
            topk2.sparse_of(_with_gaps(p, gaps))


def test_a_unary_stream_with_the_wrong_number_of_ends_is_refused() -> None:
    p = packed()
    p.parts["unary"][:] = 0  # every bit a gap's end: more ends than kept values
    with pytest.raises(ShapeError, match="unary stream"):
        topk2.sparse_of(p)
    p = packed()
    p.parts["unary"][:] = 0xFF  # no end at all
    with pytest.raises(ShapeError, match="unary stream"):
        topk2.sparse_of(p)


@pytest.mark.parametrize(
    "meta",
    [{"rice": 12}, {"rice": -1}, {"rice": 2.0}, {"rice": None}, {"ubits": 10},
     {"ubits": 10**9}, {"ubits": True}],
)  # fmt: skip
def test_meta_out_of_range_is_refused(meta: dict) -> None:
    p = packed()
    p.meta = {**p.meta, **meta}
    with pytest.raises(ShapeError, match=r"rice|ubits"):
        topk2.sparse_of(p)


@pytest.mark.parametrize("level", [np.nan, np.inf, -1.0, 1e31])
def test_a_bad_level_is_refused(level: float) -> None:
    p = packed()
    p.parts["scales"][3] = level
    with pytest.raises(ShapeError, match="levels"):
        topk2.sparse_of(p)


@pytest.mark.parametrize("part", ["scales", "codes", "rem", "unary"])
def test_parts_of_the_wrong_size_are_refused(part: str) -> None:
    p = packed()
    p.parts[part] = p.parts[part][:-4]
    with pytest.raises(ShapeError, match="layout needs"):
        topk2.sparse_of(p)


@pytest.mark.parametrize("kc", [0, topk2.MAX_KEEP + 1])
def test_a_keep_count_out_of_range_is_refused(kc: int) -> None:
    p = packed()
    p.k = kc
    with pytest.raises(ShapeError, match="keeps 1 to"):
        topk2.sparse_of(p)


def test_random_bytes_decode_to_finite_distinct_places_or_a_clear_error() -> None:
    """Fuzz: any bytes in the parts (right sizes) give unique in-range places and finite values
    within the level bound, or a ShapeError; never another exception."""
    rng = np.random.default_rng(9)
    base = packed()
    refused = 0
    for trial in range(300):
        parts = {k: v.copy() for k, v in base.parts.items()}
        p = compress.Packed("topk2", base.n, parts, k=base.k, meta=dict(base.meta))
        for name, arr in p.parts.items():
            raw = arr.view(np.uint8)
            if trial % 3 == 0 or rng.random() < 0.3:  # a few flipped bytes, or all random
                hits = rng.integers(0, raw.size, size=rng.integers(1, 4))
                raw[hits] = rng.integers(0, 256, size=hits.size, dtype=np.uint8)
            elif name != "scales":
                raw[:] = rng.integers(0, 256, size=raw.size, dtype=np.uint8)
        try:
            s = topk2.sparse_of(p)
        except ShapeError:
            refused += 1
            continue
        assert s.idx.size == np.unique(s.idx).size and (s.idx < p.n).all() and (s.idx >= 0).all()
        assert np.isfinite(s.values).all() and np.abs(s.values).max() <= topk2.MAX_SCALE
    assert 0 < refused < 300  # both outcomes were reached


@pytest.mark.gpu
def test_a_device_vector_is_encoded_on_the_host_alike() -> None:
    """No cupy twin: a device array is moved to the host and gives the numpy path's bytes."""
    import cupy as cp

    x = vec(3 * C + 11, seed=2)
    host = compress.encode(x, "topk2", 0.07)
    dev = compress.encode(cp.asarray(x), "topk2", 0.07)
    assert dev.meta == host.meta
    for name, part in host.parts.items():
        np.testing.assert_array_equal(dev.parts[name], part)
