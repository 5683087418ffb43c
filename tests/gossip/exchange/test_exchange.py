"""Exchange protocols on the in-memory network: averaging, robust rounds, deadlines, bad input."""

from __future__ import annotations

import asyncio
import logging
import time

import numpy as np
import pytest
from swarmnode.gossip.errors import ExchangeError, RemoteError
from swarmnode.gossip.exchange import InMemoryStore
from swarmnode.gossip.exchange.exchanger import ExchangeConfig, Exchanger
from swarmnode.gossip.link.inmemory import InMemoryNetwork
from swarmnode.gossip.link.transport import Arrival
from swarmnode.gossip.wire import frames as wire
from swarmnode.gossip.wire.control import encode_control
from swarmnode.gossip.wire.frames import encode_params
from swarmnode.kernels.errors import SwarmnodeError

from tests.gossip.exchange.exchange_fakes import FixedPeers
from tests.waiting import eventually

pytestmark = pytest.mark.timeout(30)

D = 257


def make_swarm(vectors, cfg, outgoing=None, stores=None):
    net = InMemoryNetwork()
    addrs = [f"p{i}:1" for i in range(len(vectors))]
    exchangers = []
    for i, v in enumerate(vectors):
        others = [(f"p{j}", a) for j, a in enumerate(addrs) if j != i]
        ex = Exchanger(
            cfg,
            self_id=f"p{i}",
            transport=net.transport(addrs[i]),
            store=stores[i] if stores is not None else InMemoryStore(v),
            peers=FixedPeers(others),
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
    # Both push at once, each handler answers its pre-exchange snapshot and queues a mix. So each
    # side queues two mixes with the other's *original* model, and only those:
    # a <- 0.25 a + 0.75 b = 3.5, b <- 0.25 b + 0.75 a = 2.5 (the mean, 3, is preserved).
    # (Not from zero: a pushed model is bounded by the receiver's own norm before its first round.)
    a, b = np.full(D, 2.0), np.full(D, 4.0)
    stores = [InMemoryStore(a, queued=True), InMemoryStore(b, queued=True)]
    _, (ea, eb) = make_swarm([a, b], ExchangeConfig(mode="average", mix=0.5), stores=stores)
    ra, rb = await asyncio.wait_for(asyncio.gather(ea.round(), eb.round()), 10)
    assert ra.applied and rb.applied and ea.served == eb.served == 1
    # queued, not applied: the rounds did not wait for a training step (each round's outer
    # step is queued behind its mix; the first only anchors the model)
    for store in stores:
        assert len([c for c in store.pending if c.kind != "outer"]) == 2
    np.testing.assert_array_equal(stores[0].x, 2.0)
    for store in stores:
        store.train()
    np.testing.assert_array_equal(stores[0].x, 3.5)
    np.testing.assert_array_equal(stores[1].x, 2.5)


def _tiny_worker(seed: int):
    """A real TrainingWorker over a tiny MLP that pauses 60 s after a step: once parked, any mix
    queued meanwhile lands at the next step; stop() drops it (it came after the last step)."""
    from swarmnode.kernels.backend import select_backend
    from swarmnode.kernels.optim import make_optimizer
    from swarmnode.node.train.model.builtin import build_model
    from swarmnode.node.train.trainer import Trainer
    from swarmnode.node.train.worker import TrainingWorker

    rng = np.random.default_rng(seed)
    X = rng.standard_normal((64, 6)).astype(np.float32)
    y = (X[:, 0] > 0).astype(np.int64)
    backend = select_backend("cpu")
    model = build_model("mlp:8", (6,), 2, backend, seed)
    trainer = Trainer(model, make_optimizer("sgd", model.params, 0.05), X, y, 16, seed)
    worker = TrainingWorker(trainer, eval_every=10**9)
    worker.set_throttle(delay_s=60.0)
    return worker


async def _parked(store) -> tuple[int, np.ndarray]:
    """(step, parameters) once the worker has stepped and sits in its 60 s pause (its step
    counter has not moved for 0.3 s; a step of this model takes well under a millisecond)."""
    step, vec = await store.snapshot()
    deadline = time.monotonic() + 10
    stable_since = time.monotonic()
    while time.monotonic() < deadline:
        await asyncio.sleep(0.02)
        now_step, now_vec = await store.snapshot()
        if now_step != step or now_step < 1:
            step, vec, stable_since = now_step, now_vec, time.monotonic()
        elif time.monotonic() - stable_since >= 0.3:
            return step, vec
    raise AssertionError("the training thread never parked")


async def test_two_peers_averaging_at_once_through_real_training_threads():
    from swarmnode.node.peer.param_store import WorkerStore

    workers = [_tiny_worker(1), _tiny_worker(2)]
    try:
        for w in workers:
            w.start()
        stores = [WorkerStore(w) for w in workers]
        parked = [await _parked(store) for store in stores]
        a0, b0 = (vec.astype(np.float64) for _, vec in parked)
        assert np.abs(a0 - b0).max() > 1e-3  # different models, or the test shows nothing
        # plain pairwise averaging (no outer step): the arithmetic below is AD-PSGD's
        cfg = ExchangeConfig(mode="average", mix=0.5, timeout=5.0, outer_lr=1.0, outer_momentum=0)
        _, (ea, eb) = make_swarm([a0, b0], cfg, stores=stores)
        # a round returns once its mix is queued: it never waits for the parked training thread
        ra, rb = await asyncio.wait_for(asyncio.gather(ea.round(), eb.round()), 10)
        assert ra.applied and rb.applied and ea.served == eb.served == 1
        # handler's mix + round's mix, each folded into the pending update on its own thread
        await eventually(lambda: all(w.mixes.folded >= 2 for w in workers), 10, "two folds each")
        pending = []
        for store, (parked_step, parked_vec) in zip(stores, parked, strict=True):
            step, now = await store.snapshot()
            assert step == parked_step  # no training step ran during the exchange ...
            np.testing.assert_array_equal(now, parked_vec)  # ... so nothing is applied yet
            m = store.worker.mixes
            assert m.pending
            pending.append(m._scale * parked_vec.astype(np.float64) + m._acc)
        # what the next step boundary would apply: both mixes, in either order
        np.testing.assert_allclose(pending[0], 0.25 * a0 + 0.75 * b0, rtol=1e-6, atol=1e-7)
        np.testing.assert_allclose(pending[1], 0.25 * b0 + 0.75 * a0, rtol=1e-6, atol=1e-7)
        for w in workers:  # stop() drops mixes that came after the last step: the last
            assert await asyncio.to_thread(w.stop, 10)  # evaluation stays the model's
            assert w.error is None and w.mixes_dropped == 1
        for store, (_, parked_vec) in zip(stores, parked, strict=True):
            np.testing.assert_array_equal((await store.snapshot())[1], parked_vec)
    finally:
        for w in workers:
            w.stop(10)


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


async def test_robust_krum_picks_among_the_received_models_even_where_mine_scores_best():
    # Mine at the centre of four others, each one apart from it along its own axis (sqrt 2
    # from each other): mine has the best Krum score (1 + 1 against 1 + 2). Picked, it would
    # make the round a no-op; a peer the others were mixed toward would then learn from nobody.
    own = np.zeros(D)
    others = [np.eye(D)[i] for i in range(1, 5)]
    cfg = ExchangeConfig(mode="robust", pull=4, aggregator="krum", byzantine_f=1, mix=1.0)
    _, exs = make_swarm([own, *others], cfg)
    result = await exs[0].round()
    assert result.applied
    x = np.asarray(exs[0].store.x, dtype=np.float64)
    assert min(np.linalg.norm(x - o) for o in others) < 1e-6, x[:5]  # one of theirs, whole


async def test_frozen_peers_cost_one_timeout_together_and_the_round_is_defined():
    # Three of the five pulled peers hang: pulled in parallel they cost one deadline, pulled one
    # after the other three. The bound sits between the two.
    timeout = 1.0
    vectors = [np.full(D, float(i)) for i in range(6)]
    cfg = ExchangeConfig(
        mode="robust", pull=5, aggregator="median", byzantine_f=1, timeout=timeout, mix=1.0
    )
    net, exs = make_swarm(vectors, cfg)
    for frozen in ("p3:1", "p4:1", "p5:1"):
        net.freeze(frozen)
    t0 = time.perf_counter()
    result = await exs[0].round()
    elapsed = time.perf_counter() - t0
    assert timeout * 0.9 <= elapsed < 1.5 * timeout, elapsed
    assert sorted(result.failures) == ["p3", "p4", "p5"]
    assert all("no answer" in why for why in result.failures.values()), result.failures
    assert result.applied  # own + p1 + p2: 3 models, enough for the median with f=1
    np.testing.assert_array_equal(exs[0].store.x, 1.0)  # median of 0, 1, 2


async def test_robust_round_with_too_few_models_is_skipped_and_logged(caplog):
    caplog.set_level(logging.INFO, logger="swarmnode.gossip.exchange.exchanger")
    vectors = [np.full(D, float(i)) for i in range(3)]
    cfg = ExchangeConfig(mode="robust", pull=4, aggregator="krum", byzantine_f=1, timeout=0.5)
    _, exs = make_swarm(vectors, cfg)
    before = exs[0].store.x.copy()
    result = await exs[0].round()
    assert not result.applied and "skipped" in result.note
    np.testing.assert_array_equal(exs[0].store.x, before)
    assert any("skipped" in r.getMessage() for r in caplog.records)


async def test_shrink_policy_aggregates_fewer_with_a_smaller_f_and_says_so(caplog):
    caplog.set_level(logging.INFO, logger="swarmnode.gossip.exchange.exchanger")
    vectors = [np.full(D, float(i)) for i in range(3)]
    cfg = ExchangeConfig(mode="robust", pull=4, aggregator="krum", byzantine_f=1, on_short="shrink")
    _, exs = make_swarm(vectors, cfg)
    result = await exs[0].round()
    assert result.applied and "f=0" in result.note
    # an applied round with a note is logged at INFO, not DEBUG
    infos = [r for r in caplog.records if r.levelno == logging.INFO]
    assert any("f=0 instead of 1" in r.getMessage() for r in infos), caplog.records


async def test_an_error_inside_a_round_is_reported_and_does_not_end_the_loop(caplog):
    # My own model is NaN: 5 rows, 4 finite, and krum with f=1 needs 5 finite ones, so the rule
    # raises AggregationError. The round must report it, not raise it into the exchange loop.
    caplog.set_level(logging.INFO, logger="swarmnode.gossip.exchange.exchanger")
    vectors = [np.full(D, np.nan)] + [np.full(D, float(i)) for i in range(1, 5)]
    cfg = ExchangeConfig(mode="robust", pull=4, aggregator="krum", byzantine_f=1)
    _, exs = make_swarm(vectors, cfg)
    for i in range(3):  # an exchange loop: every round returns
        result = await exs[0].round()
        assert not result.applied and result.received == ["p1", "p2", "p3", "p4"]
        assert "round failed: AggregationError" in result.note and "finite" in result.note
        assert exs[0].rounds == i + 1 and exs[0].rounds_applied == 0
    assert np.isnan(exs[0].store.x).all()
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 3 and "AggregationError" in warnings[0].getMessage()


async def test_a_bug_inside_a_round_still_propagates(monkeypatch):
    def broken(*args, **kwargs):
        raise ZeroDivisionError("a bug")

    monkeypatch.setattr("swarmnode.gossip.exchange.robust_round._aggregate", broken)
    vectors = [np.full(D, float(i)) for i in range(5)]
    _, exs = make_swarm(vectors, ExchangeConfig(mode="robust", pull=4, aggregator="krum"))
    with pytest.raises(ZeroDivisionError):
        await exs[0].round()


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
        await ea.handlers()["pushpull"](Arrival(bytes(body)))
    np.testing.assert_array_equal(ea.store.x, before)
    assert ea.rejected == 1 and ea.served == 0


async def test_pull_handler_rejects_a_non_pull_message():
    _, (ea, _) = make_swarm([np.zeros(D), np.ones(D)], ExchangeConfig())
    with pytest.raises(SwarmnodeError, match="pull"):
        await ea.handlers()["params"](Arrival(encode_control("gossip")))


async def test_busy_peer_answers_503_instead_of_queueing():
    _, (ea, _) = make_swarm([np.zeros(D), np.ones(D)], ExchangeConfig(max_inflight=1))
    await ea._inflight.acquire()
    with pytest.raises(RemoteError) as info:
        await ea.handlers()["params"](Arrival(encode_control("pull", sender="x")))
    assert info.value.status == 503


def test_config_errors_name_the_problem():
    with pytest.raises(ExchangeError, match="unknown aggregator"):
        ExchangeConfig(aggregator="nope").validate()
    with pytest.raises(ExchangeError, match="needs"):
        ExchangeConfig(mode="robust", aggregator="krum", byzantine_f=2, pull=3).validate()


@pytest.mark.parametrize("poisoning", [False, True])
async def test_an_honest_peer_serves_the_framed_snapshot_and_a_poisoning_one_its_outgoing(
    poisoning,
):
    async def negate(step: int, vec: np.ndarray, to: str = "") -> np.ndarray:
        return -vec

    store = InMemoryStore(np.full(D, 2.0), step=7)
    ex = Exchanger(
        ExchangeConfig(),
        self_id="p0",
        transport=InMemoryNetwork().transport("p0:1"),
        store=store,
        peers=FixedPeers([]),
        outgoing=negate,
        poisoning=lambda: poisoning,
    )
    header, served = wire.decode_params(
        await ex.handlers()["params"](Arrival(encode_control("pull", sender="t")))
    )
    np.testing.assert_array_equal(served, -2.0 if poisoning else 2.0)
    assert store.calls["snapshot_frame"] == (0 if poisoning else 1)
    assert header["step"] == 7  # the snapshot's step, either way
