"""The cache of opened records (swarmnode.gossip.membership.records.RecordOpener): a hit gives exactly what
a fresh parse gives, the relayer's fields are still checked on every entry, and a flood of
records cannot grow it past its capacity."""

from __future__ import annotations

import msgpack
import pytest
from swarmnode.gossip.auth.peer_key import PeerKey
from swarmnode.gossip.errors import CodecError
from swarmnode.gossip.membership.entries import Gossiped
from swarmnode.gossip.membership.failure import ALIVE, LEFT
from swarmnode.gossip.membership.records import RecordOpener, RecordSigner, open_entry, to_wire

pytestmark = pytest.mark.timeout(30)


def wire(key: PeerKey, hb: int = 1, signer: RecordSigner | None = None) -> list:
    g = Gossiped(key.peer_id, "10.0.0.9:1", 7, hb, ALIVE, 0.0, {"step": 3, "name": "x"})
    return to_wire((signer or RecordSigner(key)).entry(g))


def test_a_hit_is_what_a_fresh_parse_gives() -> None:
    key = PeerKey.generate()
    signer = RecordSigner(key)
    opener = RecordOpener()
    for hb in (1, 1, 2, 5, 5):  # the same record, beats relayed once or several times
        raw = wire(key, hb, signer)
        assert opener(raw) == open_entry(raw)
    assert opener.misses == 1 and opener.hits == 4


def test_the_relayers_fields_are_checked_on_every_hit() -> None:
    key = PeerKey.generate()
    opener = RecordOpener()
    raw = wire(key)
    opener(raw)
    for field, bad, why in (
        (2, LEFT, "without its own signed leave"),
        (2, "zombie", "unknown state"),
        (4, True, "bad heartbeat"),  # equal to 1, but not an int
        (4, 1 + 2000, "outside its chain"),
        (3, True, "bad tombstone age"),
        (3, -1.0, "bad tombstone age"),
    ):
        forged = list(raw)
        forged[field] = bad
        with pytest.raises(CodecError, match=why):
            opener(forged)
    assert opener(raw) == open_entry(raw)


def test_a_record_changed_by_one_byte_is_opened_afresh() -> None:
    key, other = PeerKey.generate(), PeerKey.generate()
    opener = RecordOpener()
    raw = wire(key)
    opener(raw)
    fields = msgpack.unpackb(raw[0], raw=False)
    fields[6] = other.public  # another key under the same id: not the key's id
    with pytest.raises(CodecError, match="not its key's"):
        opener([msgpack.packb(fields, use_bin_type=True), *raw[1:]])
    assert opener.misses == 2


def test_the_cache_stays_within_its_capacity() -> None:
    opener = RecordOpener(capacity=8)
    keys = [PeerKey.generate() for _ in range(20)]
    for k in keys:
        opener(wire(k))
    assert len(opener._opened) == 8
    opener(wire(keys[0]))  # evicted long ago: opened again, correctly
    assert opener.misses == 21
