"""Signed self-records: a member's address, incarnation, heartbeat and meta, signed by itself.

EIP-778 style: only the owner of a key speaks about the peer that key names. A signed entry
travels as the msgpack array `[record, signature, state, age_s]`:

- `record` is the msgpack array `[peer_id, addr, incarnation, heartbeat, signed_state, meta,
  public_key]` exactly as the owner packed it, and `signature` its Ed25519 signature of
  `DOMAIN + record` (the bytes are relayed untouched, so nobody re-encodes what was signed);
- `signed_state` is `alive` or `left`: only the owner says it leaves;
- `state` and `age_s` are the relayer's unsigned *hint* (suspect and dead are local
  observations of missed heartbeats); a hint of `left` needs a record signed `left`, and a
  record signed `left` is left whatever the hint says.

`open_entry` checks the form, the bounds and that the id is the key's, but not the signature:
`Verifier.check` does that, only for entries that would change the receiver's table (re-gossiped
stale records cost nothing), and remembers each signature it checked.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any

import msgpack
from swarmnode.gossip.codec import CodecError
from swarmnode.gossip.entries import Gossiped, parse_entry
from swarmnode.gossip.failure import ALIVE, LEFT, STATES
from swarmnode.gossip.peer_key import (
    PUBLIC_KEY_BYTES,
    SIGNATURE_BYTES,
    PeerKey,
    peer_id_of,
    verify_signature,
)

DOMAIN = b"swarmnode/member-record/1\x00"  # a member signature can sign nothing else
MAX_RECORD_BYTES = 2048  # id 128 + addr 256 + meta 12 x (32 + 128) + key, with room
_RECORD_FIELDS = 7
_SIGNED_FIELDS = 4


def seal(g: Gossiped, key: PeerKey) -> Gossiped:
    """Our own entry `g`, signed: `g` with its `proof` (record, signature, public key)."""
    signed_state = LEFT if g.state == LEFT else ALIVE
    record = msgpack.packb(
        [g.peer_id, g.addr, g.incarnation, g.heartbeat, signed_state, dict(g.meta), key.public],
        use_bin_type=True,
    )
    return g._replace(proof=(record, key.sign(DOMAIN + record), key.public))


def to_wire(g: Gossiped) -> list[Any]:
    """The array that carries `g`: signed when it has a proof, the plain 7 fields otherwise."""
    if g.proof is not None:
        return [g.proof[0], g.proof[1], g.state, g.age]
    return [g.peer_id, g.addr, g.incarnation, g.heartbeat, g.state, g.age, dict(g.meta)]


def open_entry(raw: object) -> Gossiped:
    """Parse one signed entry (see the module doc); the signature is *not* checked here."""
    if not isinstance(raw, (list, tuple)) or len(raw) != _SIGNED_FIELDS:
        raise CodecError("unsigned member entry: this swarm takes only signed records")
    record, signature, state, age = raw
    if not isinstance(record, bytes) or not 0 < len(record) <= MAX_RECORD_BYTES:
        raise CodecError("a member record must be 1-2048 bytes")
    if not isinstance(signature, bytes) or len(signature) != SIGNATURE_BYTES:
        raise CodecError("a member signature must be 64 bytes")
    try:
        fields = msgpack.unpackb(
            record,
            raw=False,
            strict_map_key=True,
            max_bin_len=MAX_RECORD_BYTES,
            max_str_len=MAX_RECORD_BYTES,
            max_array_len=_RECORD_FIELDS,
            max_map_len=64,
        )
    except Exception as exc:  # msgpack raises several unrelated types for bad input
        raise CodecError(f"malformed member record: {type(exc).__name__}") from None
    if not isinstance(fields, list) or len(fields) != _RECORD_FIELDS:
        raise CodecError(f"a member record must be an array of {_RECORD_FIELDS} fields")
    peer_id, addr, incarnation, heartbeat, signed_state, meta, public = fields
    if state not in STATES:
        raise CodecError(f"member {peer_id!r}: unknown state {state!r}")
    if signed_state not in (ALIVE, LEFT):
        raise CodecError(f"member {peer_id!r}: a record is signed alive or left")
    if signed_state == LEFT:
        state = LEFT  # the owner said goodbye: no hint undoes that
    elif state == LEFT:
        raise CodecError(f"member {peer_id!r}: marked left without its own signed leave")
    g = parse_entry([peer_id, addr, incarnation, heartbeat, state, age, meta])
    if not isinstance(public, bytes) or len(public) != PUBLIC_KEY_BYTES:
        raise CodecError(f"member {peer_id!r}: a public key must be {PUBLIC_KEY_BYTES} bytes")
    if peer_id_of(public) != peer_id:
        raise CodecError(f"member {peer_id!r}: the id is not its key's")
    return g._replace(proof=(record, signature, public))


class Verifier:
    """Checks signatures once: a signature seen valid (or forged) is remembered, so a record
    re-gossiped by every peer costs one Ed25519 verification per receiver."""

    def __init__(self, capacity: int = 8192) -> None:
        self.capacity = capacity
        self._seen: OrderedDict[bytes, bool] = OrderedDict()
        self.verified = 0  # signature checks actually run (for benches and tests)
        self.forged = 0

    def check(self, g: Gossiped) -> bool:
        """Whether `g` carries a valid signature of its owner (entries without proof: False)."""
        if g.proof is None:
            return False
        record, signature, public = g.proof
        known = self._seen.get(signature)
        if known is not None:
            return known
        ok = verify_signature(public, signature, DOMAIN + record)
        self.verified += 1
        self.forged += not ok
        self._seen[signature] = ok
        if len(self._seen) > self.capacity:
            self._seen.popitem(last=False)
        return ok
