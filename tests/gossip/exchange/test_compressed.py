"""Compressed push-pull between in-memory peers: consensus, conservation, negotiation, busy."""

from __future__ import annotations

import asyncio

import numpy as np
import pytest
from swarmnode.gossip.errors import CROSSED, RemoteError
from swarmnode.gossip.exchange import InMemoryStore
from swarmnode.gossip.exchange.compressed import CompressedPushPull, refuse_compressed
from swarmnode.gossip.link.inmemory import InMemoryNetwork
from swarmnode.gossip.link.transport import Arrival
from swarmnode.gossip.wire import frames as wire

pytestmark = pytest.mark.timeout(60)
N = 3000


async def decode(body: bytes, *, source: str, sparse: bool = False) -> tuple[dict, np.ndarray]:
    header, vec = wire.decode_params(body, expected_size=N, sparse=sparse)
    wire.validate_params(vec, N)
    return header, vec


def peer(net: InMemoryNetwork, name: str, spec: str, x: np.ndarray, compressed: bool = True):
    store = InMemoryStore(x)
    cpp = CompressedPushPull(
        spec, self_id=name, size=N, transport=net.transport(name),
        store=store, decode=decode, timeout=2.0,
    )  # fmt: skip

    async def handle(req: Arrival) -> bytes:
        body = req.body
        header, vec = await decode(body, source="request", sparse=True)
        if not compressed:
            refuse_compressed(header)
        return await cpp.serve(header, vec)

    net.register(name, {"pushpull": handle})
    return cpp, store


@pytest.mark.parametrize("spec", ["topk:0.05", "topk2:0.05", "int8", "fp16"])
async def test_two_peers_reach_consensus_and_keep_their_sum(spec: str) -> None:
    net = InMemoryNetwork()
    rng = np.random.default_rng(0)
    xa, xb = rng.standard_normal(N), rng.standard_normal(N)
    a, sa = peer(net, "A", spec, xa)
    _, sb = peer(net, "B", spec, xb)
    total = (sa.x + sb.x).astype(np.float64)
    for _ in range(80):
        step = await a.pushpull("B", "B", sa.x.copy(), 0.5)
        await sa.nudge(step, 1.0)
    np.testing.assert_allclose(sa.x + sb.x, total, atol=1e-4)  # the pair's sum is preserved
    assert np.abs(sa.x - sb.x).max() < 0.05 * np.abs(xa - xb).max()  # consensus
    # after the first full frame, every frame is a delta: far fewer bytes than raw for topk
    assert a.refs.full_frames == 1 and a.refs.delta_frames == 79
    if spec.startswith("topk"):
        assert a.bytes_sent < 0.15 * 80 * N * 4  # headers weigh at this small size


async def test_uncompressed_partner_refuses_clearly_and_is_remembered() -> None:
    net = InMemoryNetwork()
    a, sa = peer(net, "A", "int8", np.ones(N))
    peer(net, "B", "int8", np.zeros(N), compressed=False)
    with pytest.raises(RemoteError, match="`compress` none") as err:
        await a.pushpull("B", "B", sa.x, 0.5)
    assert err.value.status == 400 and "B" in a.plain and "B" not in a.refs.sent


@pytest.mark.parametrize("spec", ["int8", "topk2:0.05"])
async def test_crossing_exchanges_one_goes_through_and_the_other_keeps_the_reference(
    spec: str,
) -> None:
    """Both requests in flight at once: the smaller id's is answered (once the other's own came
    back refused), the other's refused 423 (CROSSED: no failure); the pair's copies stay shared on both sides."""
    net = InMemoryNetwork(latency=0.05)
    a, sa = peer(net, "A", spec, np.ones(N))
    b, sb = peer(net, "B", spec, np.zeros(N))
    await sa.nudge(await a.pushpull("B", "B", sa.x, 0.5), 1.0)
    outcomes = await asyncio.gather(
        a.pushpull("B", "B", sa.x, 0.5), b.pushpull("A", "A", sb.x, 0.5), return_exceptions=True
    )
    assert isinstance(outcomes[0], np.ndarray)  # A < B: A's exchange went through
    assert isinstance(outcomes[1], RemoteError) and outcomes[1].status == CROSSED
    np.testing.assert_array_equal(a.refs.sent["B"].vec, b.refs.recv["A"].vec)
    np.testing.assert_array_equal(a.refs.recv["B"].vec, b.refs.sent["A"].vec)
    # whoever was refused kept its reference: the next exchange is a delta, not a full frame
    fulls = a.refs.full_frames + b.refs.full_frames
    await a.pushpull("B", "B", sa.x, 0.5)
    await b.pushpull("A", "A", sb.x, 0.5)
    assert a.refs.full_frames + b.refs.full_frames == fulls


@pytest.mark.parametrize(
    ("spec", "outer"),
    [("topk:0.01", False), ("lowrank:4", False), ("topk2:0.07", True), ("int8", True)],
)
def test_which_codecs_keep_the_outer_step(spec: str, outer: bool) -> None:
    """topk and lowrank rounds skip the outer step; topk2 keeps it (measured: compressed.py)."""
    cpp, _ = peer(InMemoryNetwork(), "A", spec, np.zeros(N))
    assert cpp.outer_step_applies is outer
