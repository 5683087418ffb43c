"""Compressed push-pulls between real peers (`Node`s, aiohttp on 127.0.0.1): `--compress
lowrank:R` (factored deltas) and `topk2:D` (2-bit chunked top-k) travel over HTTP on the shared
start, both sides apply them, nothing is rejected, and a topk2 frame is the small fraction of
the model that the codec promises."""

from __future__ import annotations

import numpy as np
import pytest
from swarmnode.gossip.exchange.exchanger import ExchangeConfig
from swarmnode.node.peer.node import Node
from swarmnode.node.peer.state_sync import param_segments

from tests.integration.inprocess import peer_config
from tests.waiting import eventually

pytestmark = pytest.mark.timeout(90)


async def _two_peers_exchanging(spec: str, nodes: list[Node]) -> None:
    """Two mlp:16 peers (digits: a 64 x 16 and a 16 x 10 matrix) with `spec` into `nodes` (the
    caller closes them, also when this fails), once each has sent 5 deltas and applied 3 rounds
    of its own."""
    ex = ExchangeConfig(compress=spec, sync_every=5)
    nodes.append(await Node.create(peer_config(model="mlp:16", exchange=ex)))
    nodes.append(await Node.create(peer_config(model="mlp:16", exchange=ex, join=[nodes[0].addr])))
    for n in nodes:
        refs = n.exchanger.compression.refs
        await eventually(
            lambda n=n, refs=refs: refs.delta_frames >= 5 and n.exchanger.rounds_applied >= 3,
            60,
            f"{n.peer_id} to apply {spec} rounds",
        )


@pytest.mark.parametrize("spec", ["lowrank:4", "topk2:0.07"])
async def test_compressed_peers_exchange_deltas_over_http(spec: str) -> None:
    nodes: list[Node] = []
    try:
        await _two_peers_exchanging(spec, nodes)
        for n in nodes:
            refs = n.exchanger.compression.refs
            assert refs.codec == spec.split(":")[0]
            assert refs.init_frames >= 1  # the pair opened on the shared start, no full frame
            assert n.exchanger.rejected == 0
            assert np.isfinite(n.params_host()).all()
            if spec.startswith("lowrank"):  # rank 4 factors the model's own matrices
                assert refs.segs == param_segments(n.trainer)
        if spec.startswith("topk2"):
            cpp = nodes[0].exchanger.compression
            whole = 4 * nodes[0].params_host().size
            per_frame = cpp.bytes_sent / (cpp.refs.delta_frames + cpp.refs.full_frames)
            # mlp:16 is 1,210 values: the header weighs most of a frame, still < a fifth
            assert per_frame < whole / 5
    finally:
        for node in reversed(nodes):
            await node.close()
