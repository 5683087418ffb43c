"""Signed self-records: a member's address, incarnation and meta, signed by itself, and its
heartbeats, authenticated by a hash chain the signed record commits to.

EIP-778 style: only the owner of a key speaks about the peer that key names. A signed entry
travels as the msgpack array `[record, signature, state, age_s, heartbeat, reveal]`:

- `record` is the msgpack array `[peer_id, addr, incarnation, base, signed_state, meta,
  public_key, tip]` exactly as the owner packed it, and `signature` its Ed25519 signature of
  `DOMAIN + record` (the bytes are relayed untouched, so nobody re-encodes what was signed);
- `signed_state` is `alive` or `left`: only the owner says it leaves;
- heartbeats are a hash chain (S/KEY, TESLA-style): the owner draws a random seed, and the
  record commits to `tip = H^N(seed)` at heartbeat `base` (N = `CHAIN_LENGTH`). Heartbeat
  `base + k` travels with `reveal = H^(N-k)(seed)`; a receiver holding the heartbeat `h'` with
  its reveal `r'` checks a later `h` with `h - h'` hashes: `H^(h-h')(reveal) == r'`. Only the
  owner knows the preimages, so nobody else can advance its heartbeat, and a heartbeat costs a
  receiver one SHA-256 instead of an Ed25519 verification. The owner signs a new record (a new
  chain) when anything else changes, and when a chain is spent;
- `state` and `age_s` are the relayer's unsigned *hint* (suspect and dead are local
  observations of missed heartbeats); a hint of `left` needs a record signed `left`, and a
  record signed `left` is left whatever the hint says.

`open_entry` checks the form, the bounds and that the id is the key's, but neither signature nor
chain: `Verifier.check` does that, only for entries that would change the receiver's table
(re-gossiped stale records cost nothing), and remembers each signature it checked.
"""

from __future__ import annotations

import hashlib
import math
import os
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Any, NamedTuple

import msgpack
from swarmnode.gossip.auth import (
    PUBLIC_KEY_BYTES,
    SIGNATURE_BYTES,
    PeerKey,
    peer_id_of,
    verify_signature,
)
from swarmnode.gossip.errors import CodecError, MembershipError
from swarmnode.gossip.membership.entries import MAX_COUNTER, Gossiped, Proof, parse_entry
from swarmnode.gossip.membership.failure import ALIVE, LEFT, STATES
from swarmnode.gossip.wire import unpack_bounded

DOMAIN = b"swarmnode/member-record/2\x00"  # a member signature can sign nothing else
MAX_RECORD_BYTES = 2048  # id 128 + addr 256 + meta 12 x (32 + 128) + key + tip, with room
CHAIN_LENGTH = 1024  # heartbeats one record covers: ~8.5 min at the default 0.5 s interval
CHAIN_BYTES = 32
# Meta keys that move with training (the status page's step/loss/acc of other members): a
# change of only these is signed at most this often, so a training peer does not make every
# receiver verify a fresh signature each interval. Any other change is signed at once.
PROGRESS_KEYS = frozenset({"step", "loss", "acc"})
PROGRESS_RESEAL_S = 120.0  # at 30 s the verifications were 11% of gossip CPU (docs/benchmarks.md)
_RECORD_FIELDS = 8
_SIGNED_FIELDS = 6


def chain_step(value: bytes) -> bytes:
    return hashlib.sha256(value).digest()


def _walk(value: bytes, steps: int) -> bytes:
    for _ in range(steps):
        value = hashlib.sha256(value).digest()
    return value


def _pack(g: Gossiped, key: PeerKey, tip: bytes) -> bytes:
    signed_state = LEFT if g.state == LEFT else ALIVE
    return msgpack.packb(
        [
            g.peer_id,
            g.addr,
            g.incarnation,
            g.heartbeat,
            signed_state,
            dict(g.meta),
            key.public,
            tip,
        ],
        use_bin_type=True,
    )


def seal(g: Gossiped, key: PeerKey, seed: bytes | None = None) -> Gossiped:
    """Our own entry `g`, signed once, its heartbeat the base of a fresh chain (a one-shot
    record; a peer signs through a `RecordSigner`, which keeps the chain)."""
    tip = _walk(seed or os.urandom(CHAIN_BYTES), CHAIN_LENGTH)
    record = _pack(g, key, tip)
    proof = Proof(record, key.sign(DOMAIN + record), key.public, g.heartbeat, tip, tip)
    return g._replace(proof=proof)


class RecordSigner:
    """Signs our own entry: a new record when something but the heartbeat changed (progress
    meta at most every `progress_reseal_s`), else only the chain's next reveal."""

    def __init__(
        self,
        key: PeerKey,
        *,
        clock: Callable[[], float] = time.monotonic,
        progress_reseal_s: float = PROGRESS_RESEAL_S,
        chain_length: int = CHAIN_LENGTH,
    ) -> None:
        if not 1 <= chain_length <= CHAIN_LENGTH:
            raise MembershipError(f"a chain is 1..{CHAIN_LENGTH} heartbeats, not {chain_length}")
        self.key = key
        # heartbeats one record covers: a signer that beats only a few times (a test's, an
        # attacker's thousands of sybils) draws only those links, not 1,024 hashes a record
        self.chain_length = chain_length
        self._clock = clock
        self.progress_reseal_s = progress_reseal_s
        self._last: Gossiped | None = None  # the entry last signed (its heartbeat the base)
        self._chain: list[bytes] = []  # _chain[i] = H^i(seed)
        self._sealed_at = 0.0
        self.signed = 0  # records signed (for benches and tests)

    def entry(self, g: Gossiped) -> Gossiped:
        last = self._last
        if last is None or self._must_reseal(last, g):
            chain = [os.urandom(CHAIN_BYTES)]
            for _ in range(self.chain_length):
                chain.append(chain_step(chain[-1]))
            record = _pack(g, self.key, chain[-1])
            proof = Proof(
                record,
                self.key.sign(DOMAIN + record),
                self.key.public,
                g.heartbeat,
                chain[-1],
                chain[-1],
            )
            self._chain, self._sealed_at, self.signed = chain, self._clock(), self.signed + 1
            last = self._last = g._replace(proof=proof)
            return last
        assert last.proof is not None
        k = g.heartbeat - last.proof.base
        reveal = self._chain[self.chain_length - k]
        return last._replace(heartbeat=g.heartbeat, proof=last.proof._replace(reveal=reveal))

    def _must_reseal(self, last: Gossiped, g: Gossiped) -> bool:
        assert last.proof is not None
        if last[:3] != g[:3] or (last.state == LEFT) != (g.state == LEFT):
            return True
        if not 0 <= g.heartbeat - last.proof.base <= self.chain_length:
            return True  # the chain is spent
        if last.meta is g.meta:
            return False
        changed = {k for k in {*last.meta, *g.meta} if last.meta.get(k) != g.meta.get(k)}
        if changed - PROGRESS_KEYS or any(last.meta.get(k) is None for k in changed):
            return True  # not progress, or its first value (the first evaluation): at once
        return bool(changed) and self._clock() - self._sealed_at >= self.progress_reseal_s


def to_wire(g: Gossiped) -> list[Any]:
    """The array that carries `g`: signed when it has a proof, the plain 7 fields otherwise."""
    if g.proof is not None:
        return [g.proof.record, g.proof.signature, g.state, g.age, g.heartbeat, g.proof.reveal]
    return [g.peer_id, g.addr, g.incarnation, g.heartbeat, g.state, g.age, dict(g.meta)]


class _Record(NamedTuple):
    """What a record's bytes say, validated (everything but the relayer's fields)."""

    peer_id: str
    addr: str
    incarnation: int
    base: int
    signed_state: str
    meta: Mapping[str, Any]
    public: bytes
    tip: bytes


def _open_record(record: bytes) -> _Record:
    """Unpack and check one record's bytes: form, bounds, and that the id is the key's."""
    fields = unpack_bounded(
        record,
        max_bytes=MAX_RECORD_BYTES,
        max_array_len=_RECORD_FIELDS,
        max_map_len=64,
        error=CodecError,
        what="member record",
    )
    if not isinstance(fields, list) or len(fields) != _RECORD_FIELDS:
        raise CodecError(f"a member record must be an array of {_RECORD_FIELDS} fields")
    peer_id, addr, incarnation, base, signed_state, meta, public, tip = fields
    if signed_state not in (ALIVE, LEFT):
        raise CodecError(f"member {peer_id!r}: a record is signed alive or left")
    # the base is a heartbeat: the same bounds (the entry's own heartbeat is checked per entry)
    g = parse_entry([peer_id, addr, incarnation, base, ALIVE, 0.0, meta])
    if not isinstance(tip, bytes) or len(tip) != CHAIN_BYTES:
        raise CodecError(f"member {peer_id!r}: a chain tip must be {CHAIN_BYTES} bytes")
    if not isinstance(public, bytes) or len(public) != PUBLIC_KEY_BYTES:
        raise CodecError(f"member {peer_id!r}: a public key must be {PUBLIC_KEY_BYTES} bytes")
    if peer_id_of(public) != peer_id:
        raise CodecError(f"member {peer_id!r}: the id is not its key's")
    # read-only: one opened record is shared by every entry that carries the same bytes
    return _Record(
        g.peer_id,
        g.addr,
        g.incarnation,
        g.heartbeat,
        signed_state,
        MappingProxyType(meta),
        public,
        tip,
    )


_Fields = tuple[bytes, bytes, Any, float, int, bytes]


def _split(raw: object) -> _Fields:
    """The six fields of a signed entry, each checked for type (and size) but not yet against
    its record: after this, equal fields parse to equal entries."""
    if not isinstance(raw, (list, tuple)) or len(raw) != _SIGNED_FIELDS:
        raise CodecError("unsigned member entry: this swarm takes only signed records")
    record, signature, state, age, heartbeat, reveal = raw
    if not isinstance(record, bytes) or not 0 < len(record) <= MAX_RECORD_BYTES:
        raise CodecError("a member record must be 1-2048 bytes")
    if not isinstance(signature, bytes) or len(signature) != SIGNATURE_BYTES:
        raise CodecError("a member signature must be 64 bytes")
    if not isinstance(reveal, bytes) or len(reveal) != CHAIN_BYTES:
        raise CodecError(f"a heartbeat proof must be {CHAIN_BYTES} bytes")
    if not isinstance(heartbeat, int) or isinstance(heartbeat, bool):
        raise CodecError(f"bad heartbeat {heartbeat!r}")
    if not isinstance(age, (int, float)) or isinstance(age, bool) or not 0 <= age < math.inf:
        raise CodecError(f"bad tombstone age {age!r}")
    return record, signature, state, age, heartbeat, reveal


def _entry(rec: _Record, fields: _Fields) -> Gossiped:
    """The entry that an opened record and the relayer's fields (hint, age, heartbeat) make."""
    record, signature, state, age, heartbeat, reveal = fields
    if state not in STATES:
        raise CodecError(f"member {rec.peer_id!r}: unknown state {state!r}")
    if rec.signed_state == LEFT:
        state = LEFT  # the owner said goodbye: no hint undoes that
    elif state == LEFT:
        raise CodecError(f"member {rec.peer_id!r}: marked left without its own signed leave")
    if not rec.base <= heartbeat <= min(rec.base + CHAIN_LENGTH, MAX_COUNTER):
        raise CodecError(f"member {rec.peer_id!r}: heartbeat {heartbeat} is outside its chain")
    proof = Proof(record, signature, rec.public, rec.base, rec.tip, reveal)
    return Gossiped(
        rec.peer_id, rec.addr, rec.incarnation, heartbeat, state, float(age), rec.meta, proof
    )


def open_entry(raw: object) -> Gossiped:
    """Parse one signed entry (see the module doc); signature and chain are *not* checked."""
    fields = _split(raw)
    return _entry(_open_record(fields[0]), fields)


class RecordOpener:
    """`open_entry` with the opened records remembered by their exact bytes (bounded LRU).

    A record is re-gossiped unchanged by every peer, ~6 times an interval, for up to 120 s
    (`PROGRESS_RESEAL_S`); opening it (msgpack, the bounds, the SHA-256 and base32 of the id)
    was most of the signed gossip path's CPU. The cache holds only what a record's bytes
    determine, keyed by all of them, so a hit gives what a fresh parse would; the relayer's
    fields (hint, age, heartbeat, chain value) are checked on every entry, except that an entry
    whose six fields equal the last one built from that record (the same beat relayed by
    several peers) is that entry again. Signatures and chains are still `Verifier`'s. Records
    that fail to open are not remembered; a flood of good ones only evicts (LRU), which costs
    the honest records a fresh parse, never a wrong answer.
    """

    def __init__(self, capacity: int = 4096) -> None:
        self.capacity = capacity
        # record bytes -> [its opened fields, the last entry's six fields, that entry]
        self._opened: OrderedDict[bytes, list[Any]] = OrderedDict()
        self.hits = 0  # records found opened (for benches and tests)
        self.misses = 0

    def __call__(self, raw: object) -> Gossiped:
        fields = _split(raw)
        record = fields[0]
        slot = self._opened.get(record)
        if slot is None:
            self.misses += 1
            slot = [_open_record(record), None, None]
            self._opened[record] = slot
            if len(self._opened) > self.capacity:
                self._opened.popitem(last=False)
        else:
            self.hits += 1
            self._opened.move_to_end(record)
            if slot[1] == fields:
                return slot[2]  # type: ignore[no-any-return]
        g = _entry(slot[0], fields)
        slot[1], slot[2] = fields, g
        return g


class Verifier:
    """Checks signatures once (a signature seen valid or forged is remembered, so a record
    re-gossiped by every peer costs one Ed25519 verification per receiver) and heartbeats by
    their chain, from the last heartbeat the receiver holds of the same record."""

    def __init__(self, capacity: int = 8192) -> None:
        self.capacity = capacity
        self._seen: OrderedDict[bytes, bool] = OrderedDict()
        self.verified = 0  # signature checks actually run (for benches and tests)
        self.forged = 0
        self.hashed = 0  # chain steps walked

    def check(self, g: Gossiped, held: Proof | None = None, held_heartbeat: int = 0) -> bool:
        """Whether `g` is its owner's word: a valid signature and a heartbeat on the chain.
        With `held` (the proof we keep of the same member, at `held_heartbeat`) and the same
        record, only the chain steps between the two heartbeats are walked."""
        proof = g.proof
        if proof is None:
            return False
        if held is not None and held.signature == proof.signature and held.record == proof.record:
            steps = g.heartbeat - held_heartbeat
            if steps < 0:
                return False
            self.hashed += steps
            return _walk(proof.reveal, steps) == held.reveal
        if not self._signed(proof):
            return False
        self.hashed += g.heartbeat - proof.base
        return _walk(proof.reveal, g.heartbeat - proof.base) == proof.tip

    def known(self, g: Gossiped) -> bool:
        """Whether `g`'s signature was checked already (valid or not): `check` costs no
        Ed25519 verification then (the intake's budget counts only the others)."""
        proof = g.proof
        if proof is None:
            return True  # refused without a check
        return proof.signature + hashlib.sha256(proof.record).digest() in self._seen

    def _signed(self, proof: Proof) -> bool:
        # remembered by signature *and* record: a valid signature glued to other bytes is new
        seen = proof.signature + hashlib.sha256(proof.record).digest()
        known = self._seen.get(seen)
        if known is not None:
            return known
        ok = verify_signature(proof.public, proof.signature, DOMAIN + proof.record)
        self.verified += 1
        self.forged += not ok
        self._seen[seen] = ok
        if len(self._seen) > self.capacity:
            self._seen.popitem(last=False)
        return ok
