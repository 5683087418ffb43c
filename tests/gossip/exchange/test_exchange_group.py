"""Group averaging and the outer step (issue 12)."""

from __future__ import annotations

import numpy as np
import pytest
from swarmnode.gossip.errors import ExchangeError
from swarmnode.gossip.exchange import InMemoryStore
from swarmnode.gossip.exchange.exchanger import ExchangeConfig
from swarmnode.gossip.wire import frames as wire

from tests.gossip.exchange.test_exchange import D, make_swarm

pytestmark = pytest.mark.timeout(30)


# --- group averaging and the outer step (issue 12) ----------------------------------------------


async def test_a_group_round_takes_the_mean_of_all_and_each_responder_mixes_half():
    vectors = [np.full(D, float(i)) for i in range(4)]  # 0, 1, 2, 3
    # without the bounds on answers (issue 22): the plain mean
    _, exs = make_swarm(vectors, ExchangeConfig(mode="average", group=3, push_budget=False))
    r = await exs[0].round()
    assert r.applied and sorted(r.received) == ["p1", "p2", "p3"]
    np.testing.assert_allclose(exs[0].store.x, 1.5, rtol=1e-6)  # (0 + 1 + 2 + 3) / 4
    for i in (1, 2, 3):  # x_j <- (x_j + x_initiator) / 2, with the initiator's pre-round model
        np.testing.assert_allclose(exs[i].store.x, i / 2, rtol=1e-6)
    frame = len(wire.encode_params(vectors[0].astype(np.float32), sender="p0", step=0))
    assert exs[0].bytes_sent == 3 * frame and exs[1].bytes_sent == frame


async def test_a_group_round_clips_the_farthest_answer_to_the_next_one():
    vectors = [np.full(D, float(i)) for i in range(4)]  # 0, 1, 2, 3
    _, exs = make_swarm(vectors, ExchangeConfig(mode="average", group=3))
    assert (await exs[0].round()).applied
    # 3 is clipped to the second farthest distance, 2: (0 + 1 + 2 + 2) / 4 (ss-clip, f = 1)
    np.testing.assert_allclose(exs[0].store.x, 1.25, rtol=1e-6)
    np.testing.assert_allclose(exs[0].mode_round.consensus, 5 / 3, rtol=1e-6)  # where they were


async def test_a_group_round_mixes_what_came_back_when_some_peers_fail():
    vectors = [np.full(D, float(i)) for i in range(3)]
    net, exs = make_swarm(vectors, ExchangeConfig(mode="average", group=2, timeout=0.5))
    net.unregister("p2:1")
    r = await exs[0].round()
    assert r.applied and r.received == ["p1"] and "p2" in r.failures
    np.testing.assert_allclose(exs[0].store.x, 0.5, rtol=1e-6)  # pairwise: the --mix weight


def outer_steps(store: InMemoryStore) -> list[tuple[float, float]]:
    return [(c.weight, c.momentum) for c in store.landed if c.kind == "outer"]


@pytest.mark.parametrize("mode", ["average", "robust"])
async def test_an_own_round_asks_for_the_outer_step_after_its_mix(mode):
    stores = [InMemoryStore(np.full(D, float(i))) for i in range(5)]
    cfg = ExchangeConfig(mode=mode, outer_lr=0.7, outer_momentum=0.9)
    _, exs = make_swarm([s.x for s in stores], cfg, stores=stores)
    assert (await exs[0].round()).applied
    assert (
        outer_steps(stores[0]) == [(0.7, 0.9)] and outer_steps(stores[1]) == []
    )  # responders take none
    assert stores[0].landed[-1].kind == "outer"  # behind the round's mix
    cfg = ExchangeConfig(mode=mode, outer_lr=1.0, outer_momentum=0.0)  # plain averaging
    _, exs = make_swarm([s.x for s in stores], cfg, stores=stores)
    await exs[0].round()
    assert outer_steps(stores[0]) == [(0.7, 0.9)]


async def test_robust_default_is_self_centered_clipping_taken_whole():
    assert ExchangeConfig().aggregator == "ss-clip"
    vectors = [np.zeros(D), np.ones(D), np.ones(D), np.ones(D), np.full(D, 1e6)]
    _, exs = make_swarm(vectors, ExchangeConfig(mode="robust", pull=4, byzantine_f=1))
    assert (await exs[0].round()).applied
    x = exs[0].store.x
    # three honest rows at distance sqrt(D) stay whole; the liar, 1e6 times farther, gets no
    # weight: x = 0 + (3 * 1) / 5 per coordinate
    np.testing.assert_allclose(x, 3 / 5, rtol=1e-5)


def test_bad_group_and_outer_settings_are_refused():
    for kw in ({"group": 0}, {"outer_lr": 0.0}, {"outer_lr": 2.5}, {"outer_momentum": 1.0}):
        with pytest.raises(ExchangeError):
            ExchangeConfig(**kw).validate()
