"""Payload layouts of the lossy codecs on the wire (`swarmnode.gossip.wire.frames` frames them).

| codec  | header fields | payload (after the 64-byte aligned offset)             | bytes      |
|--------|---------------|--------------------------------------------------------|------------|
| `raw`  |               | n float32                                              | 4 n        |
| `f16`  |               | n float16 (IEEE half)                                  | 2 n        |
| `i8`   | `block`,`chunk`| ceil(n / block) float32 scales, then n int8            | n + 4 n/b  |
| `tk16` | `k`           | ceil(n / 65536) uint32 counts, k uint16 offsets (+1 if | 4 k + 4 n/ |
|        |               | k is odd), k float16 values                            | 65536      |
| `tk2`  | `kc`,`chunk`, | float32 (lo, hi) per chunk of 4096, 2-bit codes (four a| ~2 + log2( |
|        | `rice`,`ubits`| byte), the places' Rice-coded gaps: r low bits each,   | 4096/kc) + |
|        |               | then the unary stream; each part padded to a word      | 1.5 bits a |
|        |               | (`kernels.topk2`)                                      | kept value |
| `lr16` | `segs`        | float16: per segment [rows, cols, r], P (rows x r) then| 2 x values |
|        |               | Q (cols x r) row-major, or rows x cols values (r = 0)  | (+2 if odd)|

Every part is a whole number of 4-byte words before the next, so each starts aligned. Decoding
checks every field against the shape before touching the payload (`block` in [4, 65536],
`chunk` equal to this peer's `kernels.compress.CHUNK` since the int8 layout depends on it,
`k` <= n / 2, counts adding up to k, indices in range and increasing, no Inf/NaN half; tk2's
`chunk` equal to `topk2.CHUNK2`, `kc` in [1, 2048], `rice` in [0, 11], `ubits` in [kept, n],
levels finite and bounded, one unary end per kept value, places inside their chunk; `segs`
tiling the n values, each rank at most `lowrank.MAX_RANK` and smaller than sending the segment
whole, so a frame cannot buy decoding work its bytes do not pay for) and returns a dense float32
vector of n values: what the sender meant, never a crash, or a `WireError` naming the field.
Asked `sparse`, a tk16 or tk2 payload comes back as a `compress.Sparse` (indices, values) after the
same checks: a reference copy takes it in O(k) (`gossip.exchange.refs`), not n.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from swarmnode.gossip.errors import WireError
from swarmnode.gossip.wire import bufpool
from swarmnode.kernels import compress, lowrank, topk2
from swarmnode.kernels.errors import ShapeError

DENSE: dict[str, np.dtype] = {"raw": np.dtype("<f4"), "f16": np.dtype("<f2")}
PACKED = ("i8", "tk16", "tk2", "lr16")
ALL = (*DENSE, *PACKED)
# kernels.compress codec name -> wire codec name
WIRE_NAME = {"fp16": "f16", "int8": "i8", "topk": "tk16", "topk2": "tk2", "lowrank": "lr16"}
MIN_BLOCK, MAX_BLOCK = 4, 1 << 16


def _int_field(header: dict[str, Any], key: str, lo: int, hi: int) -> int:
    value = header.get(key)
    if not isinstance(value, int) or isinstance(value, bool) or not lo <= value <= hi:
        raise WireError(
            f"payload header field {key!r} must be an integer in [{lo}, {hi}] for codec "
            f"{header['codec']!r}, got {value!r}"
        )
    return value


def payload_nbytes(header: dict[str, Any], count: int) -> int:
    codec = header["codec"]
    if codec in DENSE:
        return count * DENSE[codec].itemsize
    if codec == "i8":
        block = _int_field(header, "block", MIN_BLOCK, MAX_BLOCK)  # a power of two: int8_decode
        if header.get("chunk") != compress.CHUNK:  # a peer of another version lays blocks out
            raise WireError(  # differently: refuse rather than pair values with wrong scales
                f"payload header field 'chunk' must be {compress.CHUNK} for codec 'i8' (the "
                f"int8 layout this peer decodes), got {header.get('chunk')!r}"
            )
        return count + 4 * (-(-count // block))
    if codec == "lr16":
        values = lowrank.payload_values(_segs_field(header, count))
        return 2 * (values + values % 2)
    if codec == "tk2":
        return sum(topk2.part_nbytes(count, *_tk2_fields(header, count)))
    k = _int_field(header, "k", 0, count // 2)
    return 4 * compress.topk_buckets(count) + 2 * (k + k % 2) + 2 * k


def _tk2_fields(header: dict[str, Any], count: int) -> tuple[int, int, int]:
    """A tk2 header's (`kc`, `rice`, `ubits`), checked, with its `chunk` (the layout's)."""
    if header.get("chunk") != topk2.CHUNK2:
        raise WireError(
            f"payload header field 'chunk' must be {topk2.CHUNK2} for codec 'tk2', got "
            f"{header.get('chunk')!r}"
        )
    kc = _int_field(header, "kc", 1, topk2.MAX_KEEP)
    rice, ubits = header.get("rice"), header.get("ubits")
    try:
        topk2.check_meta(count, kc, rice, ubits)
    except ShapeError as exc:
        raise WireError(f"payload header of codec 'tk2': {exc}") from None
    return kc, rice, ubits


def _segs_field(header: dict[str, Any], count: int) -> list[tuple[int, int, int]]:
    """An lr16 header's `segs`, checked: [rows, cols, r] lists tiling `count` values."""
    segs = header.get("segs")
    if not isinstance(segs, list) or not 1 <= len(segs) <= lowrank.MAX_SEGS:
        raise WireError(
            f"payload header field 'segs' must be a list of 1 to {lowrank.MAX_SEGS} segments"
        )
    out, total = [], 0
    for seg in segs:
        if (
            not isinstance(seg, list)
            or len(seg) != 3
            or any(not isinstance(v, int) or isinstance(v, bool) for v in seg)
        ):
            raise WireError("each of 'segs' must be a list of three integers [rows, cols, r]")
        rows, cols, r = seg
        if rows < 1 or cols < 1 or not 0 <= r <= lowrank.MAX_RANK:
            raise WireError(f"segment {seg} needs rows, cols >= 1, r in [0, {lowrank.MAX_RANK}]")
        if r and r != lowrank.seg_rank(rows, cols, r):  # factors no smaller than the matrix
            raise WireError(f"segment {seg}: rank {r} does not compress a {rows} x {cols} matrix")
        total += rows * cols
        if total > count:
            break
        out.append((rows, cols, r))
    if total != count:
        raise WireError(f"'segs' tile {total} values, the shape holds {count}")
    return out


def decode_payload(
    header: dict[str, Any], payload: memoryview, count: int, sparse: bool = False
) -> np.ndarray | compress.Sparse:
    """The dense float32 vector a non-raw payload stands for (sizes already checked); `sparse`:
    a tk16 payload as a `compress.Sparse`, checked alike."""
    codec = header["codec"]
    try:
        if codec == "f16":
            values = np.frombuffer(payload, dtype="<f2", count=count)
            packed = compress.Packed("fp16", count, {"values": values})
            return compress.fp16_decode(packed, out=bufpool.floats(count))
        if codec == "i8":
            block = header["block"]
            nb = -(-count // block)
            scales = np.frombuffer(payload, dtype="<f4", count=nb)
            if not np.isfinite(scales).all():
                raise WireError("i8 payload has a non-finite block scale")
            q = np.frombuffer(payload, dtype=np.int8, count=count, offset=4 * nb)
            parts = {"scales": scales, "q": q}
            packed = compress.Packed("int8", count, parts, block=block)
            return compress.int8_decode(packed, out=bufpool.floats(count))
        if codec == "lr16":
            return _decode_lowrank(header, payload, count)
        if codec == "tk2":
            s = _decode_topk2(header, payload, count)
            return s if sparse else s.dense()
        s = _decode_topk(header["k"], payload, count)
        return s if sparse else s.dense()
    except ShapeError as exc:
        raise WireError(f"{codec} payload: {exc}") from None


def _decode_lowrank(header: dict[str, Any], payload: memoryview, count: int) -> np.ndarray:
    segs = _segs_field(header, count)  # checked again: payload_nbytes did, on this header
    values = np.frombuffer(payload, dtype="<f2", count=lowrank.payload_values(segs))
    if not np.isfinite(values).all():
        raise WireError("lr16 payload has a non-finite value")
    # finite fp16 factors give a finite product: r <= 64 terms of at most 65504^2 each
    packed = compress.Packed("lowrank", count, {"values": values}, segs=tuple(segs))
    return lowrank.decode(packed, out=bufpool.floats(count))


def _decode_topk(k: int, payload: memoryview, count: int) -> compress.Sparse:
    nb = compress.topk_buckets(count)
    counts = np.frombuffer(payload, dtype="<u4", count=nb)
    if int(counts.sum(dtype=np.int64)) != k:  # before any allocation sized by the counts
        raise WireError(
            f"tk16 bucket counts add up to {int(counts.sum(dtype=np.int64))}, not k={k}"
        )
    lo = np.frombuffer(payload, dtype="<u2", count=k, offset=4 * nb)
    values = np.frombuffer(payload, dtype="<f2", count=k, offset=4 * nb + 2 * (k + k % 2))
    p = compress.Packed("topk", count, {"counts": counts, "lo": lo, "values": values}, k=k)
    idx = compress.topk_indices(p)
    if k and (int(idx[-1]) >= count or (k > 1 and not (idx[1:] > idx[:-1]).all())):
        raise WireError(f"tk16 indices must increase strictly and stay below {count}")
    return compress.topk_sparse(p)


def _decode_topk2(header: dict[str, Any], payload: memoryview, count: int) -> compress.Sparse:
    kc, rice, ubits = _tk2_fields(header, count)
    sizes = topk2.part_nbytes(count, kc, rice, ubits)
    buf = np.frombuffer(payload, dtype=np.uint8, count=sum(sizes))
    ends = np.cumsum(sizes)
    parts = dict(zip(("scales", "codes", "rem", "unary"), np.split(buf, ends[:-1]), strict=True))
    meta = {"rice": rice, "ubits": ubits}
    return topk2.sparse_of(compress.Packed("topk2", count, parts, k=kc, meta=meta))


def packed_fields(packed: compress.Packed) -> tuple[str, dict[str, Any], list[np.ndarray]]:
    """(wire codec, its header fields, the parts in wire order) of an encoded vector."""
    codec = WIRE_NAME[packed.codec]
    if codec == "f16":
        return codec, {}, [packed.parts["values"]]
    if codec == "i8":
        fields = {"block": packed.block, "chunk": compress.CHUNK}
        return codec, fields, [packed.parts["scales"], packed.parts["q"]]
    if codec == "lr16":
        values = packed.parts["values"]
        pad = [np.zeros(1, np.float16)] if values.size % 2 else []  # a whole number of words
        return codec, {"segs": [list(s) for s in packed.segs]}, [values, *pad]
    parts = packed.parts
    if codec == "tk2":  # each part a whole number of words already (kernels.topk2)
        fields = {"kc": packed.k, "chunk": topk2.CHUNK2, **packed.meta}
        return codec, fields, [parts[k] for k in ("scales", "codes", "rem", "unary")]
    pad = [np.zeros(1, np.uint16)] if packed.k % 2 else []  # the values start word-aligned
    return codec, {"k": packed.k}, [parts["counts"], parts["lo"], *pad, parts["values"]]
