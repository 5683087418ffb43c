"""Signed records with hash-chained heartbeats (swarmnode.gossip.membership.records): a heartbeat under a
record already verified costs a few SHA-256, not an Ed25519 verification, and nobody but the
owner can advance it. Fake clocks throughout."""

from __future__ import annotations

import os

import pytest
from swarmnode.gossip.auth.peer_key import PeerKey
from swarmnode.gossip.errors import MembershipError
from swarmnode.gossip.membership.entries import Gossiped
from swarmnode.gossip.membership.failure import ALIVE, LEFT
from swarmnode.gossip.membership.records import (
    CHAIN_LENGTH,
    PROGRESS_RESEAL_S,
    RecordSigner,
    Verifier,
    open_entry,
    to_wire,
)
from swarmnode.gossip.membership.table import MemberTable, Timing

pytestmark = pytest.mark.timeout(30)

TIMING = Timing(
    suspect_after=1.5, dead_after=2.5, tombstone_ttl=60.0, gossip_interval=0.5, fanout=3
)


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def owner(clock: Clock | None = None) -> tuple[PeerKey, RecordSigner]:
    key = PeerKey.generate()
    return key, RecordSigner(key, clock=clock or Clock())


def entry(key: PeerKey, hb: int, meta: dict | None = None, state: str = ALIVE) -> Gossiped:
    return Gossiped(key.peer_id, "10.0.0.9:1", 7, hb, state, 0.0, meta or {})


def relayed(g: Gossiped) -> Gossiped:
    """What a receiver gets: the entry through the wire form."""
    return open_entry(to_wire(g))


def receiver() -> tuple[MemberTable, Verifier]:
    return MemberTable("me", "10.0.0.1:1", 1, TIMING), Verifier()


def test_heartbeats_reuse_one_record_and_cost_no_signature() -> None:
    key, signer = owner()
    table, verifier = receiver()
    first = signer.entry(entry(key, 1))
    for hb in range(1, 40, 3):  # a receiver that misses beats walks the gap
        assert table.merge([relayed(signer.entry(entry(key, hb)))], hb * 0.5, verifier.check) == 0
    assert table.get(key.peer_id, 20.0).heartbeat == 37
    assert signer.signed == 1 and verifier.verified == 1  # one Ed25519 each way, 13 beats
    assert signer.entry(entry(key, 37)).proof.signature == first.proof.signature
    assert verifier.hashed == 36


def test_a_forged_or_replayed_heartbeat_is_refused() -> None:
    key, signer = owner()
    table, verifier = receiver()
    table.merge([relayed(signer.entry(entry(key, 5)))], 0.0, verifier.check)
    honest = signer.entry(entry(key, 9))
    forged = honest._replace(proof=honest.proof._replace(reveal=os.urandom(32)))
    assert table.merge([relayed(forged)], 0.1, verifier.check) == 1
    # an old reveal relabelled with a later heartbeat walks to the wrong value
    old = signer.entry(entry(key, 6))
    relabelled = old._replace(heartbeat=9)
    assert table.merge([relayed(relabelled)], 0.2, verifier.check) == 1
    assert table.get(key.peer_id, 0.2).heartbeat == 5
    assert table.merge([relayed(honest)], 0.3, verifier.check) == 0
    assert table.get(key.peer_id, 0.3).heartbeat == 9


def test_a_spent_chain_is_replaced_by_a_newly_signed_record() -> None:
    key, signer = owner()
    table, verifier = receiver()
    for hb in (1, CHAIN_LENGTH + 1, CHAIN_LENGTH + 2):
        assert table.merge([relayed(signer.entry(entry(key, hb)))], 0.0, verifier.check) == 0
    assert signer.signed == 2 and verifier.verified == 2
    assert table.get(key.peer_id, 0.0).heartbeat == CHAIN_LENGTH + 2


def test_a_short_chain_verifies_like_a_full_one_and_is_renewed_when_spent() -> None:
    key = PeerKey.generate()
    signer = RecordSigner(key, clock=Clock(), chain_length=4)
    table, verifier = receiver()
    for hb in (1, 3, 5, 6, 9):  # the record at 1 covers 1..5: 6 takes a new one
        assert table.merge([relayed(signer.entry(entry(key, hb)))], 0.0, verifier.check) == 0
        assert table.get(key.peer_id, 0.0).heartbeat == hb
    assert signer.signed == 2 and verifier.verified == 2
    with pytest.raises(MembershipError):
        RecordSigner(key, chain_length=CHAIN_LENGTH + 1)


def test_a_heartbeat_outside_its_record_chain_is_malformed() -> None:
    key, signer = owner()
    wire = to_wire(signer.entry(entry(key, 3)))
    wire[4] = 3 + CHAIN_LENGTH + 1
    with pytest.raises(Exception, match="outside its chain"):
        open_entry(wire)
    wire[4] = 2  # before the record's base
    with pytest.raises(Exception, match="outside its chain"):
        open_entry(wire)


def test_progress_meta_is_resigned_at_most_every_interval_the_rest_at_once() -> None:
    clock = Clock()
    key, signer = owner(clock)
    signer.entry(entry(key, 1, {"step": 1, "acc": None, "name": "a"}))
    moved = signer.entry(entry(key, 2, {"step": 50, "acc": None, "name": "a"}))
    assert signer.signed == 1 and moved.meta["step"] == 1  # progress may lag
    evaluated = signer.entry(entry(key, 2, {"step": 50, "acc": 0.5, "name": "a"}))
    assert signer.signed == 2 and evaluated.meta["acc"] == 0.5  # but not its first value
    signer.entry(entry(key, 3, {"step": 70, "acc": 0.55, "name": "a"}))
    assert signer.signed == 2  # later progress waits again
    clock.now = PROGRESS_RESEAL_S
    moved = signer.entry(entry(key, 3, {"step": 99, "acc": 0.6, "name": "a"}))
    assert signer.signed == 3 and moved.meta["step"] == 99
    turned = signer.entry(entry(key, 4, {"step": 99, "acc": 0.6, "name": "a", "byzantine": "nan"}))
    assert signer.signed == 4 and turned.meta["byzantine"] == "nan"  # not progress: at once
    gone = signer.entry(entry(key, 4, {"step": 99}, state=LEFT))
    assert signer.signed == 5 and relayed(gone).state == LEFT


def test_a_valid_signature_glued_to_other_record_bytes_is_not_taken_from_the_cache() -> None:
    key, signer = owner()
    _, verifier = receiver()
    good = signer.entry(entry(key, 1))
    assert verifier.check(relayed(good))
    other = RecordSigner(key).entry(entry(key, 1)._replace(addr="6.6.6.6:1"))
    glued = other._replace(proof=other.proof._replace(signature=good.proof.signature))
    assert not verifier.check(relayed(glued))
    assert verifier.forged == 1


def test_a_leave_is_relayed_with_its_own_signed_record() -> None:
    """A peer that learns a leave relays the leaver's signed `left` record, not its alive one
    with a `left` hint (malformed to every receiver: one clean leave flooded the others' logs)."""
    key, signer = owner()
    relay, relay_check = receiver()
    relay.merge([relayed(signer.entry(entry(key, 3)))], 0.0, relay_check.check)
    gone = signer.entry(entry(key, 4, state=LEFT))
    assert relay.merge([relayed(gone)], 0.1, relay_check.check) == 0
    tomb = [g for g in relay.digest(0.2) if g.peer_id == key.peer_id]
    assert len(tomb) == 1 and tomb[0].state == LEFT
    onward, onward_check = receiver()
    assert onward.merge([relayed(tomb[0])], 0.3, onward_check.check) == 0  # opens cleanly
    assert onward.get(key.peer_id, 0.3).state == LEFT


def test_a_leave_after_a_local_death_is_relayed_with_its_signed_record() -> None:
    key, signer = owner()
    relay, relay_check = receiver()
    relay.merge([relayed(signer.entry(entry(key, 3)))], 0.0, relay_check.check)
    relay.sweep(10.0)  # silent past dead_after: dead by our own timer
    assert relay.get(key.peer_id, 10.0).state == "dead"
    relay.merge([relayed(signer.entry(entry(key, 4, state=LEFT)))], 10.1, relay_check.check)
    tomb = [g for g in relay.digest(10.2) if g.peer_id == key.peer_id]
    assert open_entry(to_wire(tomb[0])).state == LEFT
