"""Compressed exchange with error feedback: one shared reference per partner and direction.

Why not CHOCO's public copies: CHOCO-SGD keeps, on every peer, a public copy x̂_j of each
neighbour and broadcasts C(x_i - x̂_i) to *all* neighbours each round, so every neighbour's copy
of x̂_i stays identical. Asynchronous pairwise gossip has no fixed neighbour set (partners are
sampled, they join and die) and no broadcast: a copy held by a peer that missed one round is
wrong forever. So the reference here is per *pair*: what A last told B (`sent[B]` on A) is
exactly what B holds as A's copy (`recv[A]` on B), versioned `(epoch, ver)` on both sides:

- A sends B `C(x_A - sent[B])`, tagged with the base version; B adds it to `recv[A]` only if its
  version matches (else `RefMismatch`, 409), and both move to `ver + 1`. What C drops is still
  in `x_A - sent[B]` and goes out in a later round: that is the error feedback.
- With no reference yet (first contact, a restart, an eviction, a lost answer) A sends a full
  frame with a fresh random epoch (`FULL_CODEC`: int8 of the whole model for topk), and B
  replaces its copy. Any doubt ends in a full frame, never in a silently diverged pair.
- The initiator commits `sent[B]` only once B's answer arrived (B has applied it); it states
  its copy of B's reference in `want_*`, and B answers with a delta only if that matches
  (else a full frame). B commits its side at once: if the answer is lost, A's `want_*` is
  stale next time and B falls back to a full frame.
- Each side then takes CHOCO's gossip step on the pair's copies, d = w (x̂_other - x̂_self),
  x_self += d, x_other -= d (the pair's sum is preserved), *and moves both copies by the same
  step* on both sides (`gossip_step`): both hold the same two copies and compute the same d, so
  the copies stay shared without sending anything, and the step never shows up in x - x̂.
  Without that bookkeeping the dense step lands in what topk must catch up with, and a large
  w (0.5) diverges (CHOCO proper needs a consensus step of the order of the compression ratio);
  with it, w = 0.5 converges at topk 1% (docs/exchange.md, "Compression with error feedback and
  shared references"). The two sides' arithmetic is the same numpy code; a full frame every
  `RESYNC_EVERY` deltas bounds any drift anyway.
- Not mixing towards the partner's copy, x <- (1 - w) x + w x̂_other: the copies lag the models'
  jumps, so each side would be pulled back towards the other's old model.

**The shared start.** Peers started from the same `--seed` and model hold the same initial
parameters x0, and CHOCO's own start (every public copy at the common initial point) needs no
bytes then: `init_epoch(x0)` (a digest of x0's bytes) names the reference "x0, nothing applied
yet" = `(init_epoch, 1)`. A peer with no reference for a partner sends `C(x - x0)` on it
instead of a full frame, and states it in `want_*` for the answer; a receiver applies such a
frame on its own x0, whatever it held for that partner (it stands alone, like a full frame),
but only if its digest is the same: a partner with another start (another seed, model or
version) answers 409, and the pair falls back to full frames (`init_refused`). Both copies
then start where the models started and catch up at the codec's rate (the error feedback),
which for a pair formed late in a run is slower than a full frame, never wrong: the two sides
still hold the same bytes. A joiner's state sync takes the same path (`gossip.exchange.compressed`).

A topk delta travels into a copy sparsely (the decoder's `compress.Sparse`: k values added at
their indices, only those checked for overflow), and the sender's new reference is its old one
plus the same k values: the dense path's bits, without decoding n zeros (`_plus`,
`_add_overflows`).

Memory: two model-sized vectors per partner, for at most `max_partners` partners (least recently
used evicted; an evicted pair resynchronises with a full frame).
"""

from __future__ import annotations

import random
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

import numpy as np
import xxhash
from swarmnode.gossip.errors import RefMismatch, WireError
from swarmnode.gossip.wire import count_nonfinite, floats, halves
from swarmnode.kernels import compress, lowrank

FULL_CODEC = {"fp16": "fp16", "int8": "int8", "topk": "int8", "topk2": "int8", "lowrank": "int8"}
REF_KINDS = ("full", "delta")
# codecs whose delta holds part of a difference, not all of it
PARTIAL = ("topk", "topk2", "lowrank")
SPARSE = ("topk", "topk2")  # codecs whose delta is k values at their places (`compress.sparse`)
RESYNC_EVERY = 200  # deltas before a pair starts afresh with a full frame
EPOCH_BITS = 62  # epochs are msgpack-friendly non-negative integers
CONTACTED_CAP = 4096  # partner ids remembered for `_start_fits` (ids only: a few bytes each)


def init_epoch(x0: np.ndarray) -> int:
    """The epoch naming "the shared start x0, nothing applied": a digest of x0's bytes and
    size. Not a security boundary (a member can send any delta anyway; the push bound is what
    protects): it tells honest peers with different starts apart."""
    h = xxhash.xxh3_64(np.ascontiguousarray(x0, dtype=np.float32).view(np.uint8))
    h.update(x0.size.to_bytes(8, "little"))
    return h.intdigest() & ((1 << EPOCH_BITS) - 1)


@dataclass
class Ref:
    epoch: int
    ver: int  # deltas applied since the full frame, plus one
    vec: np.ndarray


@dataclass
class Outgoing:
    """An encoded message for one partner, and what `sent[partner]` becomes once committed."""

    partner: str
    packed: compress.Packed
    fields: dict[str, Any]
    new: Ref


def _int(header: dict[str, Any], key: str) -> int:
    value = header.get(key)
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise WireError(f"payload header field {key!r} must be a non-negative integer")
    return value


class PairRefs:
    """References for one peer's compressed exchange (`codec`: fp16, int8, topk, topk2 or lowrank;
    `segs`: the model's matrices, lowrank's segments, `kernels.lowrank.segments`)."""

    def __init__(
        self,
        codec: str,
        ratio: float,
        size: int,
        *,
        max_partners: int = 8,
        seed: int = 0,
        init: np.ndarray | None = None,
        segs: lowrank.Segs = (),
    ) -> None:
        if codec not in FULL_CODEC:
            raise ValueError(f"no reference exchange for codec {codec!r}")
        if init is not None and init.shape != (size,):
            raise ValueError(f"shared start of shape {init.shape}, model of {size} values")
        self.codec, self.ratio, self.size = codec, ratio, size
        self.segs = segs
        # lowrank: per partner, each matrix's last Q (the power iteration's warm start). The
        # sender's state alone (a frame carries its factors), so losing it costs accuracy, never
        # agreement: kept across a resync, in an LRU of its own of `max_partners` partners.
        self.warm: OrderedDict[str, dict[int, Any]] = OrderedDict()
        self.max_partners = max_partners
        # read only, never written (copies are taken from it): the caller's vector, shared
        self.init = None if init is None else np.asarray(init, dtype=np.float32)
        self.init_epoch = None if init is None else init_epoch(self.init)
        self.init_refused: set[str] = set()  # partners whose start differs: full frames
        self._contacted: set[str] = set()  # partners we sent a committed frame (`_start_fits`)
        self.sent: OrderedDict[str, Ref] = OrderedDict()
        self.recv: OrderedDict[str, Ref] = OrderedDict()
        self._rng = random.Random(seed ^ random.getrandbits(32))
        self.full_frames = 0
        self.delta_frames = 0  # init_frames of them on the shared start
        self.init_frames = 0

    # --- sending -------------------------------------------------------------------------

    def want(self, partner: str) -> dict[str, Any]:
        """Header fields stating our copy of the partner's reference (empty: none)."""
        r = self.recv.get(partner)
        if r is not None:
            return {"want_epoch": r.epoch, "want_ver": r.ver}
        return {} if partner in self.init_refused else self.want_init()

    def want_init(self) -> dict[str, Any]:
        """The `want_*` fields asking for a frame on our shared start (empty: none)."""
        return {} if self.init_epoch is None else {"want_epoch": self.init_epoch, "want_ver": 1}

    def init_ok(self, want: dict[str, Any]) -> bool:
        """Whether `want_*` names our shared start."""
        return bool(self.want_init()) and want == self.want_init()

    def _start_fits(self, partner: str) -> bool:
        """Whether a pair with no reference restarts on the shared start rather than a full
        frame. Always for fp16 and int8 (their codec of x - x0 is as precise as of x). For
        topk and lowrank only at first contact: x0 + topk(x - x0) holds 1% of the progress
        (lowrank: the top directions of each matrix), fine while
        the models are near x0, but a pair that lost its reference later in the run (a failed
        exchange, the resync every `RESYNC_EVERY` deltas) would lag behind again."""
        return self.codec not in PARTIAL or partner not in self._contacted

    def _init_ref(self, partner: str, want: dict[str, Any] | None) -> Ref | None:
        """The shared start as the base for `partner` (None: a full frame): as the initiator
        unless the partner refused it; answering, only where the partner asked for it."""
        if self.init is None or self.init_epoch is None:
            return None
        if want is None:
            return None if partner in self.init_refused else Ref(self.init_epoch, 1, self.init)
        if (want.get("want_epoch"), want.get("want_ver")) == (self.init_epoch, 1):
            return Ref(self.init_epoch, 1, self.init)
        return None

    def encode(
        self,
        partner: str,
        x: np.ndarray,
        want: dict[str, Any] | None = None,
        *,
        dense_start: bool = False,
    ) -> Outgoing:
        """Encode `x` for `partner`: a delta against `sent[partner]`, on the shared start, or a
        full frame when there is neither or (`want` given: an answer) the partner's copy is not
        at its version. `dense_start`: a frame on the start in the whole-model codec (int8 for
        topk), for a joiner's state sync, whose model must be right at once rather than 1% a
        round. numpy work: call it from a worker thread."""
        ref = self.sent.get(partner)
        if ref is not None and ref.ver > RESYNC_EVERY:
            ref = None
        if ref is not None and want is not None:
            if (want.get("want_epoch"), want.get("want_ver")) != (ref.epoch, ref.ver):
                ref = None
        on_start = (
            ref is None
            and (dense_start or self._start_fits(partner))
            and (ref := self._init_ref(partner, want)) is not None
        )
        if ref is None:
            packed = compress.encode(x, FULL_CODEC[self.codec], self.ratio)
            new = Ref(self._rng.getrandbits(62), 1, compress.decode(packed))
            fields = {"ref": "full", "ref_epoch": new.epoch, "ref_ver": 0}
            self.full_frames += 1
        else:
            codec = FULL_CODEC[self.codec] if on_start and dense_start else self.codec
            diff = _minus(x, ref.vec)
            half = halves(diff.size) if codec == "fp16" and _host(diff) else None
            packed = compress.encode(
                diff, codec, self.ratio, segs=self.segs, warm=self._warm(partner, codec), out=half
            )
            del diff  # back to the pool before `_plus` takes one
            new = Ref(ref.epoch, ref.ver + 1, _plus(ref.vec, packed))
            fields = {"ref": "delta", "ref_epoch": ref.epoch, "ref_ver": ref.ver}
            self.delta_frames += 1
            self.init_frames += on_start
        return Outgoing(partner, packed, fields, new)

    def _warm(self, partner: str, codec: str) -> dict[int, Any] | None:
        if codec != "lowrank":
            return None
        state = self.warm.setdefault(partner, {})
        self.warm.move_to_end(partner)
        while len(self.warm) > self.max_partners:
            self.warm.popitem(last=False)
        return state

    def commit(self, out: Outgoing) -> None:
        if len(self._contacted) >= CONTACTED_CAP:  # churn over a long run: start afresh
            self._contacted.clear()
        self._contacted.add(out.partner)
        self._put(self.sent, out.partner, out.new)

    def forget(self, partner: str, out: Outgoing | None = None, mismatch: bool = False) -> None:
        """Drop what we sent this partner (unknown whether it arrived): next time, full or on
        the shared start; full for good once the partner refused (`mismatch`: 409) a frame on
        the shared start (`out`), which means its start is not ours."""
        self.sent.pop(partner, None)
        if mismatch and out is not None and self.is_init_frame(out.fields):
            self.init_refused.add(partner)

    def is_init_frame(self, fields: dict[str, Any]) -> bool:
        return (
            self.init_epoch is not None
            and fields.get("ref") == "delta"
            and (fields.get("ref_epoch"), fields.get("ref_ver")) == (self.init_epoch, 1)
        )

    # --- receiving -----------------------------------------------------------------------

    @staticmethod
    def is_ref_frame(header: dict[str, Any]) -> bool:
        return "ref" in header

    def receive(
        self, partner: str, header: dict[str, Any], vec: np.ndarray | compress.Sparse
    ) -> np.ndarray:
        """Apply a received full frame or delta (already decoded, finite, of our size; a tk16
        one as `compress.Sparse`) to our copy of `partner`'s reference; return that copy.
        Raises `RefMismatch` or `WireError`."""
        kind = header.get("ref")
        if kind not in REF_KINDS:
            raise WireError(f"payload header field 'ref' must be full or delta, got {kind!r}")
        epoch, ver = _int(header, "ref_epoch"), _int(header, "ref_ver")
        if kind == "full":
            vec = vec.dense() if isinstance(vec, compress.Sparse) else vec  # none sends tk16 full
            copy = vec if vec.flags.writeable and vec.flags.owndata else vec.copy()
            self._put(self.recv, partner, Ref(epoch, 1, copy))
            return copy
        if self.is_init_frame(header) and self.init is not None:  # stands alone, like a full one
            self._put(self.recv, partner, Ref(epoch, 1, self.init.copy()))
        r = self.recv.get(partner)
        if r is None or (r.epoch, r.ver) != (epoch, ver):
            held = "none" if r is None else f"{r.epoch}/{r.ver}"
            self.recv.pop(partner, None)
            raise RefMismatch(
                f"reference out of sync with {partner}: delta on {epoch}/{ver}, we hold {held}"
            )
        if _add_overflows(r.vec, vec):
            self.recv.pop(partner, None)
            raise WireError(f"reference of {partner} overflowed: dropped, next frame is full")
        r.ver += 1
        self.recv.move_to_end(partner)
        return r.vec

    def gossip_step(self, partner: str, weight: float) -> np.ndarray | None:
        """d = w (x̂_partner - x̂_self) for this pair, with both copies moved by it (x̂_self += d,
        x̂_partner -= d); the caller adds d to its model. None when either copy is missing."""
        theirs, mine = self.recv.get(partner), self.sent.get(partner)
        if theirs is None or mine is None:
            return None
        with np.errstate(over="ignore", invalid="ignore"):  # checked just below
            d = _minus(theirs.vec, mine.vec)
        if count_nonfinite(d):  # both copies stay finite, which `receive` relies on: a finite
            self.sent.pop(partner, None)  # d (w <= 1/2) keeps each between the two old copies
            self.recv.pop(partner, None)
            raise WireError(f"references of {partner} too far apart: dropped, next frame full")
        d *= np.float32(weight)
        mine.vec += d
        theirs.vec -= d
        return d

    def _put(self, table: OrderedDict[str, Ref], partner: str, ref: Ref) -> None:
        table[partner] = ref
        table.move_to_end(partner)
        while len(table) > self.max_partners:
            table.popitem(last=False)


def _host(x: Any) -> bool:
    return isinstance(x, np.ndarray)


def _minus(a: Any, b: Any) -> Any:
    """a - b, float32, into a reused vector where numpy."""
    if isinstance(a, np.ndarray) and isinstance(b, np.ndarray):
        out = floats(a.size)
        np.subtract(a.reshape(-1), b.reshape(-1), out=out)
        return out.reshape(a.shape)
    return a - b


def _plus(base: np.ndarray, packed: compress.Packed) -> np.ndarray:
    """base + decode(packed), a new vector (a reused one: `bufpool.MODELS`): for topk a copy
    of base with the k values added at their indices (what the dense sum gives, without
    decoding n zeros and adding them)."""
    host = isinstance(base, np.ndarray)
    if packed.codec in SPARSE and host:
        s = compress.sparse(packed)
        out = floats(base.size)
        np.copyto(out, base.reshape(-1))
        out[s.idx] += s.values  # the indices are unique: fancy-index += is exact (no add.at)
        return out
    parts_on_host = all(isinstance(v, np.ndarray) for v in packed.parts.values())
    step = compress.decode(packed, floats(packed.n) if host and parts_on_host else None)
    step += base
    return step


def _add_overflows(copy: np.ndarray, vec: np.ndarray | compress.Sparse) -> bool:
    """copy += vec in place; whether that made a value non-finite. A sparse delta can only
    have done it at its own indices (the copy was finite: `receive` and `gossip_step` keep it
    so, and its values are finite), so only those k values are checked."""
    with np.errstate(over="ignore", invalid="ignore"):  # overflow is what this checks
        if isinstance(vec, compress.Sparse):
            copy[vec.idx] += vec.values
            return not bool(np.isfinite(copy[vec.idx]).all())
        copy += vec
    return bool(count_nonfinite(copy))
