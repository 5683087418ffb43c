"""`topk2:DENSITY`: chunked top-k with 2-bit values, SparseLoCo's compressor (Sarfi et al. 2025).

The vector is cut into chunks of `CHUNK2` = 4096 values; each chunk keeps its `kc` = ceil(DENSITY
x 4096) values of largest magnitude (the last, shorter chunk its share: ceil(kc x its length /
4096)). A kept value is 2 bits: its sign and one of two magnitudes its chunk shares, `lo` and
`hi` (float32): the kept magnitudes are split at their mean, and each level is the mean of its
side, so a chunk's decoded magnitudes add up to its kept ones (the one-step 2-means of the
magnitudes). What the levels round off, and what is not kept, stays in the sender's difference
and goes out later (the error feedback: `gossip.exchange.refs`).

Places: the gaps between a chunk's increasing places (g = place - previous place - 1, the first
from -1), Rice-coded with one parameter r per frame (the cheapest of 0..11): g >> r in unary
(that many 1 bits, then a 0) in one stream, g's low r bits in another. A gap then costs about
log2(4096 / kc) + 1.5 bits where a fixed 12-bit place took 12 (at DENSITY 0.07 about 5.7: 7.7
bits a kept value rather than 14, so nearly twice the values for the same bytes). Two streams
rather than one interleaved so that decoding is vectorised: the unary stream's 0 bits mark
where each gap ends.

Parts, each a whole number of 4-byte words (wire layout `gossip.wire.codecs`):

- `scales`: float32 (lo, hi) per chunk, 8 bytes a chunk;
- `codes`: 2 bits per kept value (bit 1: negative, bit 0: `hi`), four to a byte;
- `rem`: each gap's low r bits, most significant first, packed;
- `unary`: each gap's g >> r in unary, packed; `meta` holds r (`rice`) and its bits (`ubits`).

Numpy only: the exchange encodes host vectors (`compress.encode` moves a device array to the
host first), and a frame is small.

`sparse_of` is also the decoder of a frame from the network: it checks everything a hostile
sender controls (`rice` and `ubits` in range and the part sizes they imply, levels finite and
bounded, exactly one 0 bit per kept value in the unary stream, every chunk's places inside it;
places increase strictly by construction, so no value is written twice).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from swarmnode.kernels.codec_base import Packed, Sparse, _check_vector
from swarmnode.kernels.errors import ShapeError

CHUNK2 = 1 << 12  # values per chunk: a place within it is below 4096. Part of the wire layout.
MAX_KEEP = CHUNK2 // 2  # kc past it: denser than half, no cheaper than int8
MAX_RICE = 11  # a gap is below 4096: its low 11 bits and a short unary part at most
# a level past this is refused on decode: no trained model's difference comes near it, and a
# bound keeps a hostile level from overflowing float32 in the receiver's copy (which checks
# the k values it added for overflow anyway: `gossip.exchange.refs`)
MAX_SCALE = 1e30


def chunk_keep(density: float) -> int:
    """kc: values kept per chunk of `CHUNK2` at `density` in (0, 0.5]."""
    if not 0.0 < density <= 0.5:
        raise ShapeError(f"topk2 density must be in (0, 0.5], got {density}")
    return min(MAX_KEEP, max(1, math.ceil(density * CHUNK2)))


def layout(n: int, kc: int) -> tuple[int, int]:
    """(chunks, kept values) of n values at kc per chunk."""
    if n == 0:
        return 0, 0
    chunks = -(-n // CHUNK2)
    return chunks, (chunks - 1) * kc + last_keep(n - (chunks - 1) * CHUNK2, kc)


def last_keep(m: int, kc: int) -> int:
    """Values the last chunk, of m values, keeps: kc's share of m (at least one, at most m)."""
    return -(-kc * m // CHUNK2)


def part_nbytes(n: int, kc: int, rice: int, ubits: int) -> tuple[int, int, int, int]:
    """Bytes of (scales, codes, rem, unary), each padded to a whole number of 4-byte words."""
    chunks, kept = layout(n, kc)
    return (
        8 * chunks,
        _words(-(-kept // 4)),
        _words(-(-kept * rice // 8)),
        _words(-(-ubits // 8)),
    )


def check_meta(n: int, kc: int, rice: Any, ubits: Any) -> None:
    """`rice` in [0, MAX_RICE]; `ubits` in [kept, max(n, kept)]: one 0 bit per gap after its
    unary part, and those parts add up to at most the gaps, whose sum is below n."""
    kept = layout(n, kc)[1]
    for name, value, lo, hi in (("rice", rice, 0, MAX_RICE), ("ubits", ubits, kept, max(n, kept))):
        if not isinstance(value, int) or isinstance(value, bool) or not lo <= value <= hi:
            raise ShapeError(f"topk2 {name} must be an integer in [{lo}, {hi}], got {value!r}")


def _words(nbytes: int) -> int:
    return -(-nbytes // 4) * 4


def encode(x: np.ndarray, density: float) -> Packed:
    """The chunked top-k of x with 2-bit values (module doc). Raises ShapeError for a
    non-finite kept value (the difference of two finite models is finite)."""
    _check_vector(x)
    kc = chunk_keep(density)
    n = x.size
    chunks, kept = layout(n, kc)
    local = _places(x, kc)
    starts = np.arange(chunks, dtype=np.int64) * kc  # where each chunk's kept values begin
    owner = np.minimum(np.arange(kept, dtype=np.int64) // kc, max(chunks - 1, 0))
    values = x[owner * CHUNK2 + local]
    if kept and not np.isfinite(values).all():
        raise ShapeError("topk2 input holds Inf or NaN")
    counts = np.diff(np.append(starts, kept))
    scales, hi = _levels(np.abs(values), starts, counts, owner)
    codes = (np.signbit(values).astype(np.uint8) << 1) | hi.astype(np.uint8)
    gaps = _gaps(local, owner)
    rice = _best_rice(gaps)
    rem, unary, ubits = _rice_streams(gaps, rice)
    sizes = part_nbytes(n, kc, rice, ubits)
    parts = {
        "scales": scales.reshape(-1),
        "codes": _pack2(codes, sizes[1]),
        "rem": _padded(rem, sizes[2]),
        "unary": _padded(unary, sizes[3]),
    }
    return Packed("topk2", n, parts, k=kc, meta={"rice": rice, "ubits": ubits})


def _gaps(local: np.ndarray, owner: np.ndarray) -> np.ndarray:
    """place - the chunk's previous place - 1 (a chunk's first: its place), int64."""
    g = local.astype(np.int64)
    if g.size:
        prev = np.empty_like(g)
        prev[0] = -1
        prev[1:] = np.where(owner[1:] == owner[:-1], g[:-1], -1)
        g -= prev + 1
    return g


def _best_rice(gaps: np.ndarray) -> int:
    """The r of 0..MAX_RICE that codes these gaps in the fewest bits (unary + r each)."""
    costs = [int((gaps >> r).sum()) + gaps.size * (1 + r) for r in range(MAX_RICE + 1)]
    return int(np.argmin(costs))


def _rice_streams(gaps: np.ndarray, r: int) -> tuple[np.ndarray, np.ndarray, int]:
    """(low r bits of each gap, packed; g >> r in unary, packed; the unary stream's bits)."""
    if r:
        shifts = np.arange(r - 1, -1, -1, dtype=np.int64)
        rem = np.packbits(((gaps[:, None] >> shifts) & 1).astype(np.uint8).reshape(-1))
    else:
        rem = np.zeros(0, np.uint8)
    q = gaps >> r
    ubits = int(q.sum()) + gaps.size
    bits = np.ones(ubits, np.uint8)
    bits[np.cumsum(q + 1) - 1] = 0  # each gap's unary part ends in a 0
    return rem, np.packbits(bits), ubits


def _padded(b: np.ndarray, nbytes: int) -> np.ndarray:
    out = np.zeros(nbytes, np.uint8)
    out[: b.size] = b
    return out


def _places(x: np.ndarray, kc: int) -> np.ndarray:
    """Each chunk's kept places (uint16, increasing within a chunk), chunk after chunk."""
    n = x.size
    full = n // CHUNK2
    out = []
    if full:
        a = np.abs(x[: full * CHUNK2]).reshape(full, CHUNK2)
        out.append(_row_top(a, kc).reshape(-1))
    if n - full * CHUNK2:
        a = np.abs(x[full * CHUNK2 :]).reshape(1, -1)
        out.append(_row_top(a, last_keep(a.shape[1], kc)).reshape(-1))
    return np.concatenate(out) if out else np.zeros(0, np.uint16)


def _row_top(a: np.ndarray, k: int) -> np.ndarray:
    """The k largest places of each row, sorted (uint16)."""
    m = a.shape[1]
    if k == m:
        top = np.broadcast_to(np.arange(m), a.shape)
    else:
        top = np.argpartition(a, m - k, axis=1)[:, m - k :]
    return np.sort(top, axis=1).astype(np.uint16)


def _levels(
    mags: np.ndarray, starts: np.ndarray, counts: np.ndarray, owner: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """((chunks, 2) float32 levels (lo, hi), whether each kept value is `hi`): split at the
    chunk's mean magnitude, each level the mean of its side (a side left empty takes the other
    side's level, so it decodes to nothing odd)."""
    if not mags.size:
        return np.zeros((0, 2), np.float32), np.zeros(0, bool)
    m64 = mags.astype(np.float64)  # sums of up to 2048 values: float64, then one rounding
    mean = np.add.reduceat(m64, starts) / counts
    hi = m64 >= mean[owner]
    n_hi = np.add.reduceat(hi.astype(np.int64), starts)
    s_hi = np.add.reduceat(np.where(hi, m64, 0.0), starts)
    s_lo = np.add.reduceat(np.where(hi, 0.0, m64), starts)
    with np.errstate(invalid="ignore", divide="ignore"):
        lvl_hi = np.where(n_hi > 0, s_hi / n_hi, mean)
        lvl_lo = np.where(counts - n_hi > 0, s_lo / (counts - n_hi), lvl_hi)
    scales = np.stack([lvl_lo, lvl_hi], axis=1)
    return np.clip(scales, 0.0, MAX_SCALE).astype(np.float32), hi


def _pack2(codes: np.ndarray, nbytes: int) -> np.ndarray:
    c = np.zeros(4 * nbytes, np.uint8)
    c[: codes.size] = codes
    q = c.reshape(-1, 4)
    return q[:, 0] | (q[:, 1] << 2) | (q[:, 2] << 4) | (q[:, 3] << 6)


def _unpack2(buf: np.ndarray, kept: int) -> np.ndarray:
    b = buf[: -(-kept // 4)]
    out = np.stack([b & 3, (b >> 2) & 3, (b >> 4) & 3, b >> 6], axis=1).reshape(-1)
    return out[:kept]


def sparse_of(p: Packed) -> Sparse:
    """The (places, values) a Packed stands for, after every check a hostile frame needs
    (module doc); raises ShapeError naming what is wrong."""
    n, kc = p.n, p.k
    if not 1 <= kc <= MAX_KEEP:
        raise ShapeError(f"topk2 keeps 1 to {MAX_KEEP} values a chunk, got {kc}")
    rice, ubits = p.meta.get("rice"), p.meta.get("ubits")
    check_meta(n, kc, rice, ubits)
    chunks, kept = layout(n, kc)
    sizes = part_nbytes(n, kc, rice, ubits)
    names = ("scales", "codes", "rem", "unary")
    parts = [np.asarray(p.parts[k]).reshape(-1).view(np.uint8) for k in names]
    got = tuple(a.nbytes for a in parts)
    if got != sizes:
        raise ShapeError(f"topk2 parts of {got} bytes, the layout needs {sizes}")
    levels = parts[0].view(np.float32).reshape(chunks, 2)
    bad = not np.isfinite(levels).all() or levels.min(initial=0.0) < 0
    if bad or levels.max(initial=0.0) > MAX_SCALE:
        raise ShapeError(f"topk2 levels must be finite and in [0, {MAX_SCALE:g}]")
    gaps = _read_gaps(parts[2], parts[3], kept, rice, ubits)
    owner = np.minimum(np.arange(kept, dtype=np.int64) // kc, max(chunks - 1, 0))
    local = _places_of(gaps, owner, kc, chunks, n)
    c = _unpack2(parts[1], kept)
    values = levels[owner, c & 1]
    values = np.where(c & 2, -values, values).astype(np.float32)
    return Sparse(n, owner * CHUNK2 + local, values)


def _read_gaps(rem: np.ndarray, unary: np.ndarray, kept: int, r: int, ubits: int) -> np.ndarray:
    bits = np.unpackbits(unary, count=ubits)
    ends = np.flatnonzero(bits == 0)
    if ends.size != kept or (kept and ends[-1] != ubits - 1):
        raise ShapeError(f"topk2 unary stream ends {ends.size} gaps in {ubits} bits, not {kept}")
    q = np.diff(ends, prepend=-1) - 1
    if not r:
        return q
    low = np.unpackbits(rem, count=kept * r).reshape(kept, r).astype(np.int64)
    return (q << r) | (low @ (1 << np.arange(r - 1, -1, -1, dtype=np.int64)))


def _places_of(gaps: np.ndarray, owner: np.ndarray, kc: int, chunks: int, n: int) -> np.ndarray:
    """Each value's place in its chunk (a running sum of gaps + 1 from the chunk's start),
    checked to stay inside the chunk: the last one holds n - (chunks - 1) x 4096 values."""
    if not gaps.size:
        return gaps
    run = np.cumsum(gaps + 1)
    starts = np.arange(chunks, dtype=np.int64) * kc
    before = np.where(starts > 0, run[np.maximum(starts - 1, 0)], 0)
    local = run - before[owner] - 1
    last = np.append(starts[1:], gaps.size) - 1  # each chunk's last (largest) place
    size = np.full(chunks, CHUNK2, dtype=np.int64)
    size[-1] = n - (chunks - 1) * CHUNK2
    if (local[last] >= size).any():
        raise ShapeError(f"topk2 place past its chunk (the vector holds {n} values)")
    return local


def decode(p: Packed, out: np.ndarray | None = None) -> np.ndarray:
    """The dense float32 vector (zeros but the kept values)."""
    s = sparse_of(p)
    out = np.empty(p.n, dtype=np.float32) if out is None else out
    out.fill(0.0)
    out[s.idx] = s.values
    return out
