"""The link table is bounded: a peer that dials ever new addresses (a churning swarm, a sybil
flood) keeps the `MAX_LINKS` most recently used links, not one per address it ever dialled."""

from __future__ import annotations

import pytest
from swarmnode.gossip.link import stats
from swarmnode.gossip.link.inmemory import InMemoryNetwork
from swarmnode.gossip.link.stats import MeasuringTransport
from swarmnode.gossip.link.transport import Arrival

pytestmark = pytest.mark.timeout(30)


async def echo(req: Arrival) -> bytes:
    return bytes(req.body)


async def test_the_least_recently_used_link_is_forgotten_past_the_bound(monkeypatch) -> None:
    monkeypatch.setattr(stats, "MAX_LINKS", 3)
    net = InMemoryNetwork()
    for addr in ("b:1", "c:1", "d:1", "e:1"):
        net.register(addr, {"echo": echo})
    t = MeasuringTransport(net.transport("a:1"))
    for addr in ("b:1", "c:1", "d:1", "b:1"):  # b used again: c is now the oldest
        await t.request(addr, "echo", b"x", timeout=1.0)
    await t.request("e:1", "echo", b"x", timeout=1.0)
    assert sorted(t.links) == ["b:1", "d:1", "e:1"]
    assert t.links["b:1"].requests == 2  # a link kept keeps its figures
