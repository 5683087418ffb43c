"""`--compress lowrank:R` between real peers (`Node`s, aiohttp on 127.0.0.1): factored deltas
travel over HTTP on the shared start, both sides apply them, nothing is rejected."""

from __future__ import annotations

import numpy as np
import pytest
from swarmnode.gossip.exchange.exchanger import ExchangeConfig
from swarmnode.node.peer.node import Node
from swarmnode.node.peer.state_sync import param_segments

from tests.integration.inprocess import peer_config
from tests.waiting import eventually

pytestmark = pytest.mark.timeout(90)


async def test_lowrank_peers_exchange_factored_deltas_over_http() -> None:
    # mlp:16 on the digits: a 64 x 16 and a 16 x 10 matrix; rank 4 factors the first
    ex = ExchangeConfig(compress="lowrank:4", sync_every=5)
    a = await Node.create(peer_config(model="mlp:16", exchange=ex))
    nodes = [a]
    try:
        nodes.append(await Node.create(peer_config(model="mlp:16", exchange=ex, join=[a.addr])))
        for n in nodes:
            refs = n.exchanger.compression.refs
            await eventually(
                lambda n=n, refs=refs: refs.delta_frames >= 5 and n.exchanger.rounds_applied >= 3,
                60,
                f"{n.peer_id} to apply lowrank rounds",
            )
            assert refs.codec == "lowrank" and refs.segs == param_segments(n.trainer)
            assert refs.init_frames >= 1  # the pair opened on the shared start, no full frame
            assert n.exchanger.rejected == 0
            assert np.isfinite(n.params_host()).all()
    finally:
        for node in reversed(nodes):
            await node.close()
