"""Issue 31, goal 6: a peer of another release is refused at join, at once, with one line on
each side naming both versions (fake peers speaking another protocol version)."""

from __future__ import annotations

import time

import msgpack
import pytest
from swarmnode.gossip.errors import MembershipError, RemoteError, VersionSkew
from swarmnode.gossip.link.transport import Arrival
from swarmnode.gossip.membership.entries import Gossiped
from swarmnode.gossip.membership.failure import ALIVE
from swarmnode.gossip.membership.records import to_wire
from swarmnode.gossip.wire.control import PROTOCOL_VERSION

from tests.gossip.membership.membership_harness import Swarm

pytestmark = pytest.mark.timeout(30)

OTHER = PROTOCOL_VERSION + 1
FAKE = "10.9.9.9:7070"


def _of_version(version: int, msg_type: str, **fields: object) -> bytes:
    return msgpack.packb({"version": version, "type": msg_type, **fields}, use_bin_type=True)


def _both(text: str, theirs: int, ours: int) -> None:
    assert f"protocol version {theirs} from the sender, {ours} at the receiver" in text, text


async def test_a_seed_answering_in_another_version_is_given_up_at_once() -> None:
    swarm = Swarm()
    joiner = swarm.add(1)

    async def join(req: Arrival) -> bytes:  # a seed of the next release: its ack
        return _of_version(OTHER, "join-ack", members=[])

    swarm.net.register(FAKE, {"join": join})
    t0 = time.monotonic()
    with pytest.raises(MembershipError) as err:
        await joiner.join([FAKE], timeout=10.0)
    assert time.monotonic() - t0 < 1.0  # not the join timeout: retrying cannot fix it
    text = str(err.value)
    _both(text, OTHER, PROTOCOL_VERSION)
    assert f"could not join via {FAKE}" in text and "\n" not in text


async def test_a_seed_that_refuses_our_version_is_given_up_at_once() -> None:
    swarm = Swarm()
    joiner = swarm.add(1)

    async def join(req: Arrival) -> bytes:  # the next release's seed reads our join: 426
        raise VersionSkew(
            f"another swarmnode release: protocol version {PROTOCOL_VERSION} from the sender, "
            f"{OTHER} at the receiver (run the same release on every peer)"
        )

    swarm.net.register(FAKE, {"join": join})
    with pytest.raises(MembershipError) as err:
        await joiner.join([FAKE], timeout=10.0)
    text = str(err.value)
    _both(text, PROTOCOL_VERSION, OTHER)  # the seed's words: ours from the sender
    assert f"this joiner speaks protocol version {PROTOCOL_VERSION}" in text


async def test_a_joiner_of_another_version_is_refused_with_426_naming_both() -> None:
    swarm = Swarm()
    seed = swarm.add(0)
    entry = to_wire(Gossiped("x", "10.0.0.9:7070", 1, 1, ALIVE, 0.0, {}))
    body = _of_version(OTHER, "join", member=entry)
    with pytest.raises(VersionSkew) as err:
        await seed.handlers()["join"](Arrival(body))
    assert err.value.status == 426
    _both(str(err.value), OTHER, PROTOCOL_VERSION)
    # through the network as a caller sees it: the status travels
    with pytest.raises(RemoteError) as remote:
        await swarm.net.transport("10.0.0.9:7070").request(seed.addr, "join", body, timeout=1.0)
    assert remote.value.status == 426
    assert len(seed.table) == 0  # nothing of it was taken
