"""The per-host cap (issue 10): live members per advertised host and per introducing address
are bounded, whatever path brings them (a join, a digest, a relay, a join answer), and members
already listed keep their place. Unsigned entries on the in-memory network and a fake clock."""

from __future__ import annotations

import pytest
from swarmnode.gossip.errors import RemoteError
from swarmnode.gossip.link.transport import Arrival
from swarmnode.gossip.membership.admission import Admission
from swarmnode.gossip.membership.caps import PREFIX_FACTOR, host_of, prefix_of
from swarmnode.gossip.membership.entries import Gossiped
from swarmnode.gossip.membership.failure import ALIVE, DEAD
from swarmnode.gossip.membership.records import to_wire
from swarmnode.gossip.membership.service import Membership, MembershipConfig
from swarmnode.gossip.wire.control import encode_control

from tests.gossip.membership.membership_harness import Swarm

pytestmark = pytest.mark.timeout(60)

CAP = 5
CFG = MembershipConfig(max_members_per_host=CAP)


def entry(i: int, host: str = "10.9.9.9", inc: int = 1, state: str = ALIVE) -> Gossiped:
    return Gossiped(f"s{i}", f"{host}:{7000 + i}", inc, 1, state, 0.0, {})


async def gossip_from(m: Membership, source: str, entries: list[Gossiped]) -> None:
    body = encode_control("gossip", sender="x", members=[to_wire(e) for e in entries])
    await m.handlers()["gossip"](Arrival(body, remote=source))  # as the HTTP app hands it


def listed(m: Membership, prefix: str = "s") -> int:
    return sum(1 for x in m.members() if x.peer_id.startswith(prefix) and x.state == ALIVE)


@pytest.mark.parametrize(
    ("addr", "host"),
    [("10.0.0.1:7070", "10.0.0.1"), ("[::1]:7070", "::1"), ("Host.Example:1", "host.example")],
)
def test_host_of(addr: str, host: str) -> None:
    assert host_of(addr) == host


async def test_one_host_keeps_at_most_the_cap_whoever_relays_it() -> None:
    m = Swarm(CFG).add(0)
    # 100 members advertising one host, sent by five different relayers (honest relays too)
    for r in range(5):
        await gossip_from(m, f"10.1.1.{r}", [entry(i) for i in range(20 * r, 20 * r + 20)])
    assert listed(m) == CAP
    assert m.intake.cap.refused == 100 - CAP


async def test_one_source_introduces_at_most_the_cap_whatever_hosts_they_claim() -> None:
    m = Swarm(CFG).add(0)
    await gossip_from(m, "10.6.6.6", [entry(i, host=f"10.7.0.{i}") for i in range(50)])
    assert listed(m) == CAP
    # another source still brings its own: the cap bounds each source, not the swarm
    await gossip_from(m, "10.6.6.7", [entry(i, host=f"10.7.1.{i}") for i in range(50, 60)])
    assert listed(m) == 2 * CAP


async def test_members_in_place_keep_it_and_a_freed_slot_is_taken_again() -> None:
    swarm = Swarm(CFG)
    m = swarm.add(0)
    await gossip_from(m, "10.1.1.1", [entry(i) for i in range(CAP)])
    await gossip_from(m, "10.1.1.2", [entry(i) for i in range(CAP, 2 * CAP)])  # full: refused
    before = {x.peer_id for x in m.members()}
    assert before == {f"s{i}" for i in range(CAP)}
    beats = [Gossiped(f"s{i}", f"10.9.9.9:{7000 + i}", 1, 2, ALIVE, 0.0, {}) for i in range(CAP)]
    await gossip_from(m, "10.1.1.3", beats)  # the members in place still beat
    assert all(m.get(f"s{i}").heartbeat == 2 for i in range(CAP))
    swarm.fake.advance(10.0)  # s0..: silent past dead_after (which grows with the swarm): dead
    await gossip_from(m, "10.1.1.2", [entry(CAP)])
    assert m.get(f"s{CAP}").state == ALIVE


async def test_a_tombstone_revived_at_a_new_incarnation_meets_the_cap() -> None:
    m = Swarm(CFG).add(0)
    await gossip_from(m, "10.1.1.1", [entry(i) for i in range(CAP)])
    # tombstones are listed without counting; reviving them must not bypass the cap
    await gossip_from(m, "10.1.1.2", [entry(i, state=DEAD) for i in range(CAP, CAP + 3)])
    await gossip_from(m, "10.1.1.2", [entry(i, inc=2) for i in range(CAP, CAP + 3)])
    assert listed(m) == CAP
    assert all(m.get(f"s{i}").state == DEAD for i in range(CAP, CAP + 3))


async def test_a_move_to_a_full_host_is_refused() -> None:
    m = Swarm(CFG).add(0)
    await gossip_from(m, "10.1.1.1", [entry(i) for i in range(CAP)])
    await gossip_from(m, "10.1.1.2", [entry(99, host="10.8.8.8")])
    moved = Gossiped("s99", "10.9.9.9:7999", 2, 1, ALIVE, 0.0, {})
    await gossip_from(m, "10.1.1.2", [moved])
    assert m.get("s99").addr == "10.8.8.8:7099"


async def test_a_join_past_the_cap_is_answered_429_naming_it() -> None:
    m = Swarm(CFG).add(0)
    for i in range(CAP):
        body = encode_control("join", member=to_wire(entry(i, host=f"10.7.0.{i}")))
        await m.handlers()["join"](Arrival(body, remote="10.6.6.6"))
    body = encode_control("join", member=to_wire(entry(CAP, host="10.7.0.99")))
    with pytest.raises(RemoteError, match=r"too many members .*\(5 per address, 20 per") as err:
        await m.handlers()["join"](Arrival(body, remote="10.6.6.6"))
    assert err.value.status == 429
    assert listed(m) == CAP


async def test_a_join_answer_obeys_the_host_cap_but_not_its_seeds_source_cap() -> None:
    swarm = Swarm(MembershipConfig(max_members_per_host=CAP, max_members=64))
    seed = swarm.add(0)
    # the seed lists 3 x CAP members on 3 hosts (3 prefixes), learnt from its own peers (from
    # 3 prefixes too), each host full
    for h in range(3):
        await gossip_from(
            seed, f"10.2.{h}.2", [entry(i, host=f"10.3.{h}.3") for i in range(h * 10, h * 10 + CAP)]
        )
    joiner = swarm.add(1)
    await joiner.join([seed.addr], timeout=5.0)
    assert listed(joiner) == 3 * CAP  # all from one seed: solicited, so no source cap
    # while a digest from the seed's address with a fourth host's members is capped
    await gossip_from(joiner, "10.0.0.0", [entry(i, host=f"10.4.4.{i}") for i in range(100, 120)])
    assert listed(joiner) == 3 * CAP + CAP


@pytest.mark.parametrize(
    ("host", "prefix"),
    [("10.1.2.3", "10.1.2.0/24"), ("2001:db8:1:2:3::4", "2001:db8:1:2::/64"),
     ("::ffff:10.1.2.3", "10.1.2.0/24"), ("host.example", "host.example")],
)  # fmt: skip
def test_prefix_of(host: str, prefix: str) -> None:
    assert prefix_of(host) == prefix


async def test_one_prefix_keeps_at_most_twice_the_cap_across_its_addresses() -> None:
    # issue 22: an attacker holding a /24 sends from 40 of its addresses, each within the
    # per-address cap, its sybils advertising 40 hosts of another /24 of its own
    m = Swarm(CFG).add(0)
    for a in range(40):
        await gossip_from(
            m, f"10.6.6.{a}", [entry(a * 10 + i, host=f"10.7.7.{a}") for i in range(3)]
        )
    assert listed(m) == PREFIX_FACTOR * CAP  # per prefix: 4 x the per-host cap, not 3 x 40
    # from another /24, sybils on a host of the full /24 are refused too (advertised prefix) ...
    await gossip_from(m, "10.8.8.8", [entry(500 + i, host="10.7.7.200") for i in range(3)])
    assert listed(m) == PREFIX_FACTOR * CAP
    # ... and those on fresh prefixes are let in (one prefix is bounded, not the swarm)
    await gossip_from(m, "10.8.8.8", [entry(600 + i, host=f"10.9.{i}.1") for i in range(3)])
    assert listed(m) == PREFIX_FACTOR * CAP + 3


def test_newcomer_rates_are_kept_per_prefix_too() -> None:
    adm = Admission(new_member_rate=1.0, new_member_burst=4, global_member_burst=1000)
    # 10 addresses of one /24: each could bring its burst of 4; the /24 brings 4 x 4 at most
    taken = sum(adm.take_newcomer(f"10.6.6.{a}", 0.0) for a in range(10) for _ in range(4))
    assert taken == PREFIX_FACTOR * 4
    assert adm.take_newcomer("10.6.7.1", 0.0)  # another /24: its own budget


def test_a_newcomer_refused_by_the_global_rate_costs_its_source_no_token() -> None:
    # every bucket is looked at before any is spent: a swarm-wide rush (the global bucket
    # empty) must not drain a quiet source's own budget, refusal after refusal
    adm = Admission(new_member_rate=1e-6, new_member_burst=3, global_member_rate=1.0,
                    global_member_burst=2)  # fmt: skip
    assert adm.take_newcomer("10.6.6.1", 0.0) and adm.take_newcomer("10.6.6.1", 0.0)
    assert not any(adm.take_newcomer("10.6.6.1", 0.0) for _ in range(5))  # global: empty
    assert adm.take_newcomer("10.6.6.1", 1.0)  # the global refilled one: the source's last
    assert not adm.take_newcomer("10.6.6.1", 5.0)  # ... and now its own bucket is empty


async def test_the_in_memory_network_has_no_source_address_only_hosts() -> None:
    # without an address (a declared id) only the host cap applies: the 200-peer in-process
    # swarm of test_membership joins through one seed without a source
    m = Swarm(CFG).add(0)
    body = encode_control(
        "gossip", sender="x", members=[to_wire(entry(i, host=f"10.7.{i}.1")) for i in range(20)]
    )
    await m.handlers()["gossip"](Arrival(body))
    assert listed(m) == 20
