"""`--compress topk2:D` between real peers (`Node`s, aiohttp on 127.0.0.1): tk2 deltas travel over
HTTP on the shared start, both sides apply them sparsely, nothing is rejected, and a frame is
the small fraction of the model that the codec promises."""

from __future__ import annotations

import numpy as np
import pytest
from swarmnode.gossip.exchange.exchanger import ExchangeConfig
from swarmnode.node.peer.node import Node

from tests.integration.inprocess import peer_config
from tests.waiting import eventually

pytestmark = pytest.mark.timeout(90)


async def test_topk2_peers_exchange_two_bit_deltas_over_http() -> None:
    ex = ExchangeConfig(compress="topk2:0.07", sync_every=5)
    a = await Node.create(peer_config(model="mlp:16", exchange=ex))
    nodes = [a]
    try:
        nodes.append(await Node.create(peer_config(model="mlp:16", exchange=ex, join=[a.addr])))
        for n in nodes:
            refs = n.exchanger.compression.refs
            await eventually(
                lambda n=n, refs=refs: refs.delta_frames >= 5 and n.exchanger.rounds_applied >= 3,
                60,
                f"{n.peer_id} to apply topk2 rounds",
            )
            assert refs.codec == "topk2" and refs.init_frames >= 1  # opened on the shared start
            assert n.exchanger.rejected == 0
            assert np.isfinite(n.params_host()).all()
        cpp = a.exchanger.compression
        whole = 4 * a.params_host().size
        per_frame = cpp.bytes_sent / (cpp.refs.delta_frames + cpp.refs.full_frames)
        # mlp:16 is 1,210 values: the header weighs most of a frame, still < a fifth of the model
        assert per_frame < whole / 5
    finally:
        for node in reversed(nodes):
            await node.close()
