"""The exchange with `compress` and a shared start (`init`): rounds and a joiner's pull go out
as differences against it, members only; peers with other starts still work together."""

from __future__ import annotations

import numpy as np
import pytest
from swarmnode.gossip.errors import RemoteError
from swarmnode.gossip.exchange import InMemoryStore
from swarmnode.gossip.exchange.exchanger import ExchangeConfig, Exchanger
from swarmnode.gossip.link.inmemory import InMemoryNetwork
from swarmnode.gossip.wire import frames as wire

from tests.gossip.exchange.exchange_fakes import RandomPeers, spread

pytestmark = pytest.mark.timeout(60)

D = 5000
X0 = np.random.default_rng(0).standard_normal(D).astype(np.float32)


class Members(RandomPeers):
    def is_member(self, peer_id: str) -> bool:
        return any(p == peer_id for p, _ in self.peers)


def swarm(spec: str, starts: list[np.ndarray], n_members: int | None = None) -> list[Exchanger]:
    """Peers at X0 plus a little training each, `init` their own start; the first
    `n_members` know each other (the rest are strangers to them)."""
    net = InMemoryNetwork()
    rng = np.random.default_rng(1)
    addrs = [f"p{i}:1" for i in range(len(starts))]
    members = n_members or len(starts)
    out = []
    for i, x0 in enumerate(starts):
        others = [(f"p{j}", a) for j, a in enumerate(addrs[:members]) if j != i]
        x = x0 + (0.01 * rng.standard_normal(D)).astype(np.float32)
        ex = Exchanger(
            ExchangeConfig(compress=spec), self_id=f"p{i}", transport=net.transport(addrs[i]),
            store=InMemoryStore(x), peers=Members(others, i), init=x0,
        )  # fmt: skip
        net.register(addrs[i], ex.handlers())
        out.append(ex)
    return out


async def test_a_swarm_on_one_start_sends_no_full_frame_and_reaches_consensus() -> None:
    exs = swarm("topk:0.01", [X0] * 4)
    before = spread(exs)
    for _ in range(60):  # ~120 exchanges per pair: below RESYNC_EVERY (a full frame then)
        for e in exs:
            r = await e.round()
            assert r.applied, r.note or r.failures
    assert spread(exs) < 0.1 * before
    assert sum(e.compression.refs.full_frames for e in exs) == 0
    assert all(e.compression.refs.init_frames >= 1 for e in exs)


async def test_peers_of_another_start_fall_back_to_full_frames_and_still_agree() -> None:
    other = np.random.default_rng(5).standard_normal(D).astype(np.float32)
    exs = swarm("int8", [X0, X0, other])
    before = spread(exs)
    for i in range(30):
        for e in exs:
            r = await e.round()
            if i == 0:  # each pair across the two starts: one 409, then full frames
                assert all("out of sync" in why for why in r.failures.values()), r.failures
            else:
                assert r.applied and not r.failures, r.note or r.failures
    assert spread(exs) < 0.1 * before
    assert "p2" in exs[0].compression.refs.init_refused
    assert exs[2].compression.refs.full_frames >= 2  # one per partner
    assert exs[0].compression.refs.sent["p1"].epoch == exs[0].compression.refs.init_epoch


@pytest.mark.parametrize("spec", ["int8", "topk:0.01"])
async def test_a_joiners_pull_is_a_difference_against_the_start(spec: str) -> None:
    exs = swarm(spec, [X0] * 3)
    joiner, donor = exs[0], exs[1]
    body = await donor._encode_mine({"type": "pull", "sender": "p0", **joiner_want(joiner)})
    header = wire.read_header(body).fields
    assert header["ref"] == "delta" and header["ref_ver"] == 1
    assert header["codec"] == "i8"  # the whole-model codec: a joiner starts on the real model
    _, got = await joiner.pull("p1", "p1:1")
    refs_j, refs_d = joiner.compression.refs, donor.compression.refs
    np.testing.assert_array_equal(refs_j.recv["p1"].vec, refs_d.sent["p0"].vec)
    np.testing.assert_array_equal(got, refs_j.recv["p1"].vec)
    assert np.abs(got - donor.store.x).max() < 2e-4  # int8 of a small difference: precise
    assert refs_d.full_frames == 0


def joiner_want(ex: Exchanger) -> dict:
    return ex.compression.refs.want_init()


async def test_a_strangers_pull_is_refused_and_opens_no_pair() -> None:
    exs = swarm("int8", [X0] * 3, n_members=2)  # p2 is nobody's member
    with pytest.raises(RemoteError) as err:
        await exs[2].pull("p0", "p0:1")
    assert err.value.status == 403 and "p2" not in exs[0].compression.refs.sent


@pytest.mark.parametrize(("spec", "outer"), [("topk:0.01", False), ("int8", True), ("none", True)])
async def test_the_outer_step_follows_dense_rounds_only(spec: str, outer: bool) -> None:
    exs = swarm(spec, [X0] * 3)
    r = await exs[0].round()
    assert r.applied, r.note or r.failures
    assert exs[0].store.calls["outer_step"] == (1 if outer else 0)
