"""The exchange with `compress`: compressed rounds between in-memory peers, peers with and
without compression side by side, pulls in fp16/int8, refused combinations."""

from __future__ import annotations

import numpy as np
import pytest
from swarmnode.gossip.errors import ExchangeError
from swarmnode.gossip.exchange import InMemoryStore
from swarmnode.gossip.exchange.exchanger import ExchangeConfig, Exchanger
from swarmnode.gossip.link.inmemory import InMemoryNetwork
from swarmnode.gossip.wire import frames as wire

from tests.gossip.exchange.exchange_fakes import RandomPeers, spread

pytestmark = pytest.mark.timeout(60)

D = 5000
SEGS = ((50, 100),)  # the model's one matrix, for lowrank


def swarm(specs: list[str], mode: str = "average") -> list[Exchanger]:
    net = InMemoryNetwork()
    rng = np.random.default_rng(0)
    addrs = [f"p{i}:1" for i in range(len(specs))]
    out = []
    # plain gossip, no outer step: its momentum moves each peer's own model, not the mean kept
    plain = {"outer_lr": 1.0, "outer_momentum": 0.0}
    for i, spec in enumerate(specs):
        others = [(f"p{j}", a) for j, a in enumerate(addrs) if j != i]
        ex = Exchanger(
            ExchangeConfig(mode=mode, compress=spec, pull=len(specs) - 1, aggregator="median",
                           **plain),
            self_id=f"p{i}", transport=net.transport(addrs[i]),
            store=InMemoryStore(rng.standard_normal(D)), peers=RandomPeers(others, i), segs=SEGS,
        )  # fmt: skip
        net.register(addrs[i], ex.handlers())
        out.append(ex)
    return out


@pytest.mark.parametrize("spec", ["topk:0.01", "topk2:0.03", "lowrank:16", "int8", "fp16"])
async def test_compressed_swarm_reaches_consensus_and_keeps_its_mean(spec: str) -> None:
    exs = swarm([spec] * 4)
    mean0 = np.mean([e.store.x for e in exs], axis=0)
    before = spread(exs)
    for _ in range(300 if spec.startswith("topk") else 60):
        for e in exs:
            r = await e.round()
            assert r.applied, r.note or r.failures
    assert spread(exs) < 0.1 * before
    np.testing.assert_allclose(np.mean([e.store.x for e in exs], axis=0), mean0, atol=1e-3)
    refs = exs[0].compression.refs
    assert refs.delta_frames > 10 * refs.full_frames


async def test_compressed_and_uncompressed_peers_work_together() -> None:
    exs = swarm(["int8", "none", "topk:0.05", "lowrank:2", "topk2:0.05"])
    for _ in range(40):
        for e in exs:
            await e.round()
    assert all("p1" in exs[i].compression.plain for i in (0, 2, 3, 4))
    assert exs[1].rejected == 0  # refused compressed requests are not malformed ones
    assert spread(exs) < 0.2


async def test_pulls_answer_quantised_models() -> None:
    exs = swarm(["int8", "int8", "int8"], mode="robust")
    _, vec = await exs[0].pull("p1", "p1:1")
    np.testing.assert_allclose(vec, exs[1].store.x, atol=0.05)
    frame = await exs[1]._encode_mine()
    assert wire.read_header(frame).codec == "i8"
    r = await exs[0].round()
    assert r.applied


@pytest.mark.parametrize(
    ("kw", "match"),
    [({"mode": "robust", "compress": "topk:0.01"}, "topk needs `mode` average"),
     ({"mode": "robust", "compress": "lowrank:4"}, "lowrank needs `mode` average"),
     ({"mode": "robust", "compress": "topk2:0.03"}, "topk2 needs `mode` average"),
     ({"compress": "topk2:0.9"}, "density"),
     ({"compress": "lowrank:100"}, "rank must be in"),
     ({"compress": "zip"}, "unknown codec"), ({"compress": "topk:3"}, "ratio")],
)  # fmt: skip
def test_bad_compress_settings_are_refused(kw: dict, match: str) -> None:
    with pytest.raises(ExchangeError, match=match):
        ExchangeConfig(**kw).validate()
