"""A join request is a stranger's entry like a digest's: past the intake's budget of signature
checks for strangers it is answered 429 (the joiner retries later), and its signature is not
checked, so that a flood of joins cannot spend what the budget bounds a digest flood to."""

from __future__ import annotations

import pytest
from swarmnode.gossip.auth.peer_key import PeerKey
from swarmnode.gossip.errors import JoinTimeout
from swarmnode.gossip.link.inmemory import InMemoryNetwork
from swarmnode.gossip.membership.admission import TokenBucket
from swarmnode.gossip.membership.service import Membership, MembershipConfig

pytestmark = pytest.mark.timeout(30)

CFG = MembershipConfig(join_attempt_timeout=0.2)


def keyed(net: InMemoryNetwork, i: int) -> Membership:
    key, addr = PeerKey.generate(), f"10.0.0.{i}:7070"
    m = Membership(key.peer_id, addr, net.transport(addr), CFG, key=key)
    net.register(addr, m.handlers())
    return m


async def test_a_join_past_the_verification_budget_is_told_to_retry_and_not_checked() -> None:
    net = InMemoryNetwork()
    seed, joiner = keyed(net, 1), keyed(net, 2)
    seed.intake.verify_budget = TokenBucket(0.0, 0.0, 0.0)  # spent, and not refilling
    with pytest.raises(JoinTimeout, match="429"):
        await joiner.join([seed.addr], timeout=0.5)
    assert seed.get(joiner.self_id) is None
    assert seed.verifier is not None and seed.verifier.verified == 0  # no Ed25519 check spent
    seed.intake.verify_budget = TokenBucket(200.0, 100.0, 0.0)  # the budget again
    await joiner.join([seed.addr], timeout=5.0)
    assert seed.get(joiner.self_id) is not None
