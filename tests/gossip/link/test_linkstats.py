"""Link measurements per partner and the link-aware partner choice."""

from __future__ import annotations

import random
from collections import Counter

import pytest
from swarmnode.gossip.errors import PeerUnreachable
from swarmnode.gossip.link.inmemory import InMemoryNetwork
from swarmnode.gossip.link.stats import SMALL_BYTES, LinkStat, MeasuringTransport, prefer_fast
from swarmnode.gossip.link.transport import Arrival

pytestmark = pytest.mark.timeout(30)


async def echo(req: Arrival) -> bytes:
    return bytes(req.body)


async def test_small_requests_measure_latency_bulk_ones_throughput() -> None:
    net = InMemoryNetwork(latency=0.01)
    net.register("b:1", {"echo": echo})
    t = MeasuringTransport(net.transport("a:1"))
    await t.request("b:1", "echo", b"x" * 100, timeout=1.0)
    s = t.links["b:1"]
    assert s.rtt_s is not None and s.rtt_s >= 0.01 and s.throughput_bps is None
    big = b"y" * (2 * SMALL_BYTES)
    await t.request("b:1", "echo", big, timeout=1.0)
    assert s.throughput_bps is not None and s.throughput_bps > 0
    assert s.bytes_sent == 100 + len(big) and s.bytes_received == 100 + len(big)
    assert s.requests == 2 and s.failures == 0 and s.inflight == 0
    row = t.snapshot({"b:1": "peer-b"})[0]
    assert row["peer_id"] == "peer-b" and row["rtt_ms"] >= 10 and row["mbit_s"] > 0


async def test_exchanges_are_counted_by_route_whatever_their_size() -> None:
    # a small model's pushpull is below SMALL_BYTES: the route, not the size, makes it one
    net = InMemoryNetwork()
    net.register("b:1", {"echo": echo, "pushpull": echo})
    t = MeasuringTransport(net.transport("a:1"))
    await t.request("b:1", "echo", b"x" * 100, timeout=1.0)
    row = t.snapshot()[0]
    assert row["exchanges"] == 0 and row["exchange_s_ago"] is None
    await t.request("b:1", "pushpull", b"x" * 100, timeout=1.0)
    row = t.snapshot()[0]
    assert row["exchanges"] == 1 and 0 <= row["exchange_s_ago"] < 1


async def test_failures_are_counted_and_raised() -> None:
    t = MeasuringTransport(InMemoryNetwork().transport("a:1"))
    with pytest.raises(PeerUnreachable):
        await t.request("nobody:1", "echo", b"x", timeout=0.5)
    s = t.links["nobody:1"]
    assert s.failures == 1 and s.inflight == 0 and s.rtt_s == 0.5


def _links(times: dict[str, float]) -> dict[str, LinkStat]:
    return {a: LinkStat(a, rtt_s=t, throughput_bps=None) for a, t in times.items()}


def test_prefer_fast_prefers_quick_links_and_starves_no_one() -> None:
    cands = [("fast", "f:1"), ("mid", "m:1"), ("slow", "s:1")]
    links = _links({"f:1": 0.01, "m:1": 0.02, "s:1": 1.0})
    rng = random.Random(0)
    counts = Counter(prefer_fast(cands, links, 1, rng, floor=0.2)[0][0] for _ in range(6000))
    assert counts["fast"] > counts["mid"] > counts["slow"]
    # weights 1, 0.5, floor 0.2: the slow partner gets ~0.2 / 1.7 of the picks, not ~1%
    assert 0.08 < counts["slow"] / 6000 < 0.16


def test_unmeasured_partners_are_tried_and_picks_are_distinct() -> None:
    cands = [("a", "a:1"), ("b", "b:1"), ("c", "c:1")]
    picked = prefer_fast(cands, _links({"a:1": 0.01}), 3, random.Random(1), floor=0.5)
    assert sorted(p for p, _ in picked) == ["a", "b", "c"]
    assert prefer_fast([], {}, 2, random.Random(1)) == []
    with pytest.raises(ValueError, match="floor"):
        prefer_fast(cands, {}, 1, random.Random(1), floor=0)
