"""The verification budget for strangers (issue 34, item 19): a flood of fresh members' signed
entries costs a receiver a bounded number of signature checks a second; members it knows are
merged first and never budgeted; a join answer is not budgeted. A fake clock, no network."""

from __future__ import annotations

import pytest
from swarmnode.gossip.auth.peer_key import PeerKey
from swarmnode.gossip.membership import intake as intake_mod
from swarmnode.gossip.membership.admission import Admission, TokenBucket
from swarmnode.gossip.membership.caps import HostCap
from swarmnode.gossip.membership.entries import Gossiped
from swarmnode.gossip.membership.failure import ALIVE
from swarmnode.gossip.membership.intake import Intake, verify_cost
from swarmnode.gossip.membership.records import RecordSigner, Verifier, open_entry, to_wire
from swarmnode.gossip.membership.table import MemberTable, Timing

pytestmark = pytest.mark.timeout(60)

TIMING = Timing(
    suspect_after=1.5, dead_after=2.5, tombstone_ttl=60.0, gossip_interval=0.5, fanout=3
)
RATE, BURST = 20.0, 10.0


def signed(key: PeerKey, hb: int = 1, signer: RecordSigner | None = None) -> Gossiped:
    g = Gossiped(key.peer_id, f"10.0.{hb % 250}.9:1", 1, hb, ALIVE, 0.0, {})
    return open_entry(to_wire((signer or RecordSigner(key)).entry(g)))


def receiver() -> tuple[Intake, Verifier]:
    table, verifier = MemberTable("me", "10.0.0.1:1", 1, TIMING), Verifier()
    # newcomer rates and the per-host cap wide open: only the verification budget is tested
    admission = Admission(new_member_rate=1e6, new_member_burst=10**6, global_member_rate=1e6,
                          global_member_burst=10**6)  # fmt: skip
    budget = TokenBucket(RATE, BURST, 0.0)
    intake = Intake(table, admission, verifier, 10_000, HostCap(10**6), verify_budget=budget)
    return intake, verifier


@pytest.fixture(scope="module")
def strangers() -> list[Gossiped]:
    return [signed(PeerKey.generate()) for _ in range(60)]


def take(intake: Intake, entries: list[Gossiped], now: float, solicited: bool = False) -> None:
    intake.merge(intake.admit(entries, "10.5.5.5:7070", now, solicited), now, "digest")


def test_strangers_cost_at_most_the_budget_of_signature_checks(strangers) -> None:
    intake, verifier = receiver()
    take(intake, strangers, 0.0)  # 60 fresh members in one digest
    assert verifier.verified == BURST and intake.deferred == 60 - BURST
    for t in (0.1, 0.2, 0.3, 0.4, 0.5):  # the same digest again, five times in half a second
        take(intake, strangers, t)
    assert verifier.verified == BURST + 0.5 * RATE  # the budget's rate, however often it comes
    assert len(intake.table) == verifier.verified  # each one checked is listed
    for t in (1.0, 1.5, 2.0, 2.5):  # gossip repeats itself: the rest come in the budget's time
        take(intake, strangers, t)
    assert len(intake.table) == 60 and verifier.verified == 60  # each checked once, no more


def test_known_members_go_first_and_are_never_budgeted(strangers) -> None:
    intake, _ = receiver()
    keys = [PeerKey.generate() for _ in range(5)]
    signers = [RecordSigner(k) for k in keys]
    take(intake, [signed(k, 1, s) for k, s in zip(keys, signers, strict=True)], 0.0)
    assert len(intake.table) == 5
    intake.verify_budget = TokenBucket(RATE, 0.0, 0.0)  # spent: no stranger gets checked now
    news = [signed(k, 2, s) for k, s in zip(keys, signers, strict=True)]
    take(intake, [*strangers[:20], *news], 0.0)  # their beats behind a crowd of strangers
    assert {m.peer_id: m.heartbeat for m in intake.table.members(0.0) if m.peer_id != "me"} == {
        k.peer_id: 2 for k in keys
    }
    assert intake.deferred == 20


def test_a_join_answer_is_not_budgeted(strangers) -> None:
    intake, _ = receiver()
    take(intake, strangers, 0.0, solicited=True)
    assert len(intake.table) == 60 and intake.deferred == 0


def test_a_long_chain_walk_costs_more_than_a_fresh_record() -> None:
    key = PeerKey.generate()
    signer = RecordSigner(key)
    fresh = signed(key, 1, signer)
    late = signed(key, 1 + 1000, signer)  # the same record, 1000 beats on
    assert verify_cost(fresh) == 1.0
    assert verify_cost(late) == pytest.approx(1 + 1000 / intake_mod.CHAIN_STEPS_PER_UNIT)


def test_a_stranger_deferred_for_the_budget_spends_no_newcomer_token(strangers) -> None:
    # the newcomer rate is spent only for an entry taken: strangers left for a later digest
    # (past the verification budget) must not use up their source's newcomer tokens
    table, verifier = MemberTable("me", "10.0.0.1:1", 1, TIMING), Verifier()
    admission = Admission(new_member_rate=1e-6, new_member_burst=5, global_member_rate=1e6,
                          global_member_burst=10**6)  # fmt: skip
    spent = TokenBucket(0.0, 0.0, 0.0)
    intake = Intake(table, admission, verifier, 10_000, HostCap(10**6), verify_budget=spent)
    for t in (0.0, 0.5, 1.0):  # the same crowd, deferred each time
        assert intake.sort(strangers[:20], "10.5.5.5:7070", t) == ([], [])
    assert intake.deferred == 60 and admission.refused_rate == 0
    intake.verify_budget = TokenBucket(RATE, BURST, 1.0)  # the budget back
    admitted, refused = intake.sort(strangers[20:30], "10.5.5.5:7070", 1.0)
    assert len(admitted) == 5  # the source's whole burst is still there
    assert [why for _, why in refused] == [intake_mod.TOO_FAST] * 5
    # ... and those refused as too fast spent none of the budget: 5 checks' worth taken
    assert intake.verify_budget.tokens == pytest.approx(BURST - 5)
