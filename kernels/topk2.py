"""`topk2:DENSITY`: chunked top-k with 2-bit values, SparseLoCo's compressor (Sarfi et al. 2025).

The vector is cut into chunks of `CHUNK2` = 4096 values; each chunk keeps its `kc` = ceil(DENSITY
x 4096) values of largest magnitude (the last, shorter chunk its share: ceil(kc x its length /
4096)). A kept value's
place within its chunk fits 12 bits, and its value 2: its sign and one of two magnitudes its
chunk shares, `lo` and `hi` (float32): the kept magnitudes are split at their mean, and each level
is the mean of its side, so a chunk's decoded magnitudes add up to its kept ones (the one-step
2-means of the magnitudes). What the levels round off, and what is not kept, stays in the
sender's difference and goes out later (the error feedback: `gossip.exchange.refs`).

Parts, each a whole number of 4-byte words (wire layout `gossip.wire.codecs`):

- `scales`: float32 (lo, hi) per chunk, 8 bytes a chunk;
- `idx`: the 12-bit places, chunk after chunk, increasing within a chunk, two in 3 bytes;
- `codes`: 2 bits per kept value (bit 1: negative, bit 0: `hi`), four to a byte.

At density 0.03 (kc = 123): 14 bits per kept value + 64 per chunk = 0.44 bits per parameter, 73x
fewer bytes than float32. Numpy only: the exchange encodes host vectors (`compress.encode` moves
a device array to the host first), and a frame is small.

`sparse_of` is also the decoder of a frame from the network: it checks everything a hostile
sender controls (scale values, places in range and strictly increasing in their chunk, so no
value is written twice; the part sizes come from `layout`, which the wire checks first).
"""

from __future__ import annotations

import math

import numpy as np
from swarmnode.kernels.codec_base import Packed, Sparse, _check_vector
from swarmnode.kernels.errors import ShapeError

CHUNK2 = 1 << 12  # values per chunk: a place within it is 12 bits. Part of the wire layout.
MAX_KEEP = CHUNK2 // 2  # kc past it: denser than half, no cheaper than int8
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


def part_nbytes(n: int, kc: int) -> tuple[int, int, int]:
    """Bytes of (scales, idx, codes), each padded to a whole number of 4-byte words."""
    chunks, kept = layout(n, kc)
    return 8 * chunks, _words(3 * -(-kept // 2)), _words(-(-kept // 4))


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
    mags = np.abs(values)
    counts = np.diff(np.append(starts, kept))
    scales, hi = _levels(mags, starts, counts, owner)
    codes = (np.signbit(values).astype(np.uint8) << 1) | hi.astype(np.uint8)
    parts = {
        "scales": scales.reshape(-1),
        "idx": _pack12(local, part_nbytes(n, kc)[1]),
        "codes": _pack2(codes, part_nbytes(n, kc)[2]),
    }
    return Packed("topk2", n, parts, k=kc)


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


def _pack12(local: np.ndarray, nbytes: int) -> np.ndarray:
    """12-bit places, two in three bytes (little-endian nibbles), zero-padded to `nbytes`."""
    v = local.astype(np.uint16)
    if v.size % 2:
        v = np.append(v, np.uint16(0))
    a, b = v[0::2], v[1::2]
    out = np.zeros(nbytes, np.uint8)
    tri = out[: 3 * a.size].reshape(-1, 3)
    tri[:, 0] = a & 0xFF
    tri[:, 1] = (a >> 8) | ((b & 0xF) << 4)
    tri[:, 2] = b >> 4
    return out


def _unpack12(buf: np.ndarray, kept: int) -> np.ndarray:
    pairs = -(-kept // 2)
    tri = buf[: 3 * pairs].reshape(-1, 3).astype(np.uint16)
    out = np.empty(2 * pairs, np.uint16)
    out[0::2] = tri[:, 0] | ((tri[:, 1] & 0xF) << 8)
    out[1::2] = (tri[:, 1] >> 4) | (tri[:, 2] << 4)
    return out[:kept]


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
    (module doc); raises ShapeError naming what is wrong. Part sizes must be `part_nbytes`'s."""
    n, kc = p.n, p.k
    if not 1 <= kc <= MAX_KEEP:
        raise ShapeError(f"topk2 keeps 1 to {MAX_KEEP} values a chunk, got {kc}")
    chunks, kept = layout(n, kc)
    sizes = part_nbytes(n, kc)
    scales, idx, codes = (np.asarray(p.parts[k]) for k in ("scales", "idx", "codes"))
    got = (scales.nbytes, idx.nbytes, codes.nbytes)
    if got != sizes:
        raise ShapeError(f"topk2 parts of {got} bytes, the layout needs {sizes}")
    levels = scales.view(np.float32).reshape(chunks, 2)
    if (
        not np.isfinite(levels).all()
        or levels.min(initial=0.0) < 0
        or levels.max(initial=0.0) > MAX_SCALE
    ):
        raise ShapeError(f"topk2 levels must be finite and in [0, {MAX_SCALE:g}]")
    local = _unpack12(idx.view(np.uint8), kept).astype(np.int64)
    owner = np.minimum(np.arange(kept, dtype=np.int64) // kc, max(chunks - 1, 0))
    _check_places(local, owner, n)
    c = _unpack2(codes.view(np.uint8), kept)
    values = levels[owner, c & 1]
    values = np.where(c & 2, -values, values).astype(np.float32)
    return Sparse(n, owner * CHUNK2 + local, values)


def _check_places(local: np.ndarray, owner: np.ndarray, n: int) -> None:
    """Strictly increasing within each chunk, and inside it (the last chunk is shorter)."""
    if not local.size:
        return
    same = owner[1:] == owner[:-1]
    if (same & (local[1:] <= local[:-1])).any():
        raise ShapeError("topk2 places must increase strictly within a chunk")
    if int(owner[-1] * CHUNK2 + local[-1]) >= n:  # the last place is each chunk's largest
        raise ShapeError(f"topk2 place past the vector's {n} values")


def decode(p: Packed, out: np.ndarray | None = None) -> np.ndarray:
    """The dense float32 vector (zeros but the kept values)."""
    s = sparse_of(p)
    out = np.empty(p.n, dtype=np.float32) if out is None else out
    out.fill(0.0)
    out[s.idx] = s.values
    return out
