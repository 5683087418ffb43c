"""Exchange protocols on the in-memory network: averaging, robust rounds, deadlines, bad input."""

from __future__ import annotations

import asyncio
import logging
import time

import numpy as np
import pytest

from gossip.codec import encode_control
from gossip.exchange import ExchangeConfig, ExchangeError, Exchanger
from gossip.inmemory import InMemoryNetwork
from gossip.transport import RemoteError
from gossip.wire import encode_params
from kernels.errors import SwarmnodeError

pytestmark = pytest.mark.timeout(30)

D = 257


class ArrayStore:
    """A ParamStore over a plain array (the node's is over its training thread)."""

    def __init__(self, x: np.ndarray) -> None:
        self.x = x.astype(np.float32)
        self.size = self.x.size
        self.step = 0

    async def snapshot(self) -> tuple[int, np.ndarray]:
        return self.step, self.x.copy()

    async def mix_in(self, other: np.ndarray, weight: float) -> None:
        self.x = (1 - weight) * self.x + weight * other


class StaticPeers:
    def __init__(self, peers: list[tuple[str, str]]) -> None:
        self.peers = peers

    def sample(self, k: int) -> list[tuple[str, str]]:
        return self.peers[:k]


def make_swarm(vectors, cfg, outgoing=None):
    net = InMemoryNetwork()
    addrs = [f"p{i}:1" for i in range(len(vectors))]
    exchangers = []
    for i, v in enumerate(vectors):
        others = [(f"p{j}", a) for j, a in enumerate(addrs) if j != i]
        ex = Exchanger(
            cfg,
            self_id=f"p{i}",
            transport=net.transport(addrs[i]),
            store=ArrayStore(v),
            peers=StaticPeers(others),
            outgoing=(outgoing or {}).get(i),
        )
        net.register(addrs[i], ex.handlers())
        exchangers.append(ex)
    return net, exchangers


async def test_average_round_moves_both_peers_to_the_midpoint():
    a, b = np.zeros(D), np.ones(D)
    _, (ea, eb) = make_swarm([a, b], ExchangeConfig(mode="average", mix=0.5))
    result = await ea.round()
    assert result.applied and result.received == ["p1"]
    np.testing.assert_allclose(ea.store.x, 0.5)
    np.testing.assert_allclose(eb.store.x, 0.5)
    assert eb.served == 1


async def test_two_peers_averaging_with_each_other_at_once_do_not_deadlock():
    a, b = np.zeros(D), np.full(D, 4.0)
    _, (ea, eb) = make_swarm([a, b], ExchangeConfig(mode="average", mix=0.5))
    ra, rb = await asyncio.wait_for(asyncio.gather(ea.round(), eb.round()), 10)
    assert ra.applied and rb.applied
    # both exchanges happened; the mean of the two models is preserved by symmetric averaging
    assert np.isfinite(ea.store.x).all() and np.isfinite(eb.store.x).all()


async def test_robust_krum_ignores_a_huge_peer_and_mean_does_not():
    rng = np.random.default_rng(0)
    base = rng.normal(size=D)
    honest = [base + 1e-3 * rng.normal(size=D) for _ in range(4)]
    liar = base * 1e6
    for rule, expect_ok in (("krum", True), ("mean", False)):
        cfg = ExchangeConfig(mode="robust", pull=4, aggregator=rule, byzantine_f=1, mix=1.0)
        _, exs = make_swarm([*honest, liar], cfg)
        result = await exs[0].round()
        assert result.applied
        dist = np.linalg.norm(exs[0].store.x - base)
        assert (dist < 1.0) == expect_ok, (rule, dist)


async def test_frozen_peer_costs_one_timeout_and_the_round_is_defined():
    vectors = [np.full(D, float(i)) for i in range(5)]
    cfg = ExchangeConfig(mode="robust", pull=4, aggregator="median", byzantine_f=1, timeout=0.5)
    net, exs = make_swarm(vectors, cfg)
    net.freeze("p3:1")
    t0 = time.perf_counter()
    result = await exs[0].round()
    elapsed = time.perf_counter() - t0
    assert elapsed < 0.5 * 3, elapsed  # one deadline, not one per peer in sequence
    assert "p3" in result.failures
    assert result.applied  # 4 models are enough for the median with f=1


async def test_robust_round_with_too_few_models_is_skipped_and_logged(caplog):
    caplog.set_level(logging.INFO, logger="gossip.exchange")
    vectors = [np.full(D, float(i)) for i in range(3)]
    cfg = ExchangeConfig(mode="robust", pull=4, aggregator="krum", byzantine_f=1, timeout=0.5)
    _, exs = make_swarm(vectors, cfg)
    before = exs[0].store.x.copy()
    result = await exs[0].round()
    assert not result.applied and "skipped" in result.note
    np.testing.assert_array_equal(exs[0].store.x, before)
    assert any("skipped" in r.getMessage() for r in caplog.records)


async def test_shrink_policy_aggregates_fewer_with_a_smaller_f():
    vectors = [np.full(D, float(i)) for i in range(3)]
    cfg = ExchangeConfig(mode="robust", pull=4, aggregator="krum", byzantine_f=1, on_short="shrink")
    _, exs = make_swarm(vectors, cfg)
    result = await exs[0].round()
    assert result.applied and "f=0" in result.note


@pytest.mark.parametrize("poison", ["nan", "shape", "garbage"])
async def test_malformed_pushpull_never_reaches_the_model(poison):
    _, (ea, _) = make_swarm([np.zeros(D), np.ones(D)], ExchangeConfig(mode="average"))
    before = ea.store.x.copy()
    if poison == "nan":
        body = encode_params(np.full(D, np.nan, np.float32), sender="x", step=0)
    elif poison == "shape":
        body = encode_params(np.zeros(D + 1, np.float32), sender="x", step=0)
    else:
        body = b"\x00\x00\x00\x05hello"
    with pytest.raises(SwarmnodeError):
        await ea.handlers()["pushpull"](bytes(body))
    np.testing.assert_array_equal(ea.store.x, before)
    assert ea.rejected == 1 and ea.served == 0


async def test_pull_handler_rejects_a_non_pull_message():
    _, (ea, _) = make_swarm([np.zeros(D), np.ones(D)], ExchangeConfig())
    with pytest.raises(SwarmnodeError, match="pull"):
        await ea.handlers()["params"](encode_control("gossip"))


async def test_busy_peer_answers_503_instead_of_queueing():
    _, (ea, _) = make_swarm([np.zeros(D), np.ones(D)], ExchangeConfig(max_inflight=1))
    await ea._inflight.acquire()
    with pytest.raises(RemoteError) as info:
        await ea.handlers()["params"](encode_control("pull", sender="x"))
    assert info.value.status == 503


def test_config_errors_name_the_problem():
    with pytest.raises(ExchangeError, match="unknown aggregator"):
        ExchangeConfig(aggregator="nope").validate()
    with pytest.raises(ExchangeError, match="needs"):
        ExchangeConfig(mode="robust", aggregator="krum", byzantine_f=2, pull=3).validate()
