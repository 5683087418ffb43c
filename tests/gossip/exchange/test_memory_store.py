"""`InMemoryStore`, the in-tree twin of `ParamStore`, against the protocol: every method, the
queued-change contract, and the outer step as the node's training thread takes it."""

from __future__ import annotations

import inspect

import numpy as np
import pytest
from swarmnode.gossip.exchange import InMemoryStore, ParamStore
from swarmnode.gossip.wire import frames as wire
from swarmnode.node.train.mixing.mixes import OuterStep

pytestmark = pytest.mark.timeout(30)

D = 97


def protocol_members() -> list[str]:
    """What `ParamStore` declares: its methods and its annotated attributes."""
    methods = [n for n, v in vars(ParamStore).items() if inspect.isfunction(v) and n[0] != "_"]
    return [*methods, *ParamStore.__annotations__]


def test_the_twin_has_every_protocol_member_with_its_signature() -> None:
    store: ParamStore = InMemoryStore(np.zeros(D))  # and a type checker sees it as one
    names = protocol_members()
    assert {"snapshot", "mix_in", "outer_step", "heading", "size"} <= set(names)
    for name in names:
        assert hasattr(store, name), name
        declared = vars(ParamStore).get(name)
        if not inspect.isfunction(declared):
            continue
        mine = getattr(InMemoryStore, name)
        assert inspect.iscoroutinefunction(mine) == inspect.iscoroutinefunction(declared), name
        assert list(inspect.signature(mine).parameters.values()) == list(
            inspect.signature(declared).parameters.values()
        ), name
    assert store.size == D


async def test_a_snapshot_is_a_float32_copy_with_the_step() -> None:
    store = InMemoryStore(np.arange(D, dtype=np.float64), step=5)
    step, x = await store.snapshot()
    assert step == 5 and x.dtype == np.float32 and x.shape == (D,)
    x[...] = -1  # the caller owns its copy
    np.testing.assert_array_equal((await store.snapshot())[1], np.arange(D))


async def test_a_framed_snapshot_decodes_to_the_model_its_step_and_sender() -> None:
    store = InMemoryStore(np.linspace(-1, 1, D), step=3)
    header, x = wire.decode_params(await store.snapshot_frame("me"), expected_size=D)
    np.testing.assert_array_equal(x, store.x)
    assert header["step"] == 3 and header["sender"] == "me"
    assert store.calls["snapshot_frame"] == 1 and store.calls["snapshot"] == 0


async def test_distance_and_norm_read_the_model_as_it_is_now() -> None:
    rng = np.random.default_rng(0)
    x, y = rng.standard_normal(D).astype(np.float32), rng.standard_normal(D).astype(np.float32)
    store = InMemoryStore(x)
    assert await store.distance(y) == pytest.approx(np.linalg.norm(x.astype(float) - y))
    assert await store.norm() == pytest.approx(np.linalg.norm(x.astype(float)))
    y[0] = np.nan
    assert not np.isfinite(await store.distance(y))


async def test_mix_and_nudge_land_at_once_by_default() -> None:
    store = InMemoryStore(np.full(D, 2.0))
    await store.mix_in(np.full(D, 4.0, np.float32), 0.25, source="p1")
    np.testing.assert_allclose(store.x, 2.5)
    await store.nudge(np.full(D, 1.0, np.float32), 0.5)
    np.testing.assert_allclose(store.x, 3.0)
    assert [(c.kind, c.weight, c.source) for c in store.landed] == [
        ("mix", 0.25, "p1"),
        ("nudge", 0.5, ""),
    ]
    assert store.pending == [] and store.x.dtype == np.float32


async def test_queued_changes_wait_for_a_training_step_and_land_in_order() -> None:
    store = InMemoryStore(np.full(D, 2.0), queued=True)
    await store.mix_in(np.full(D, 4.0, np.float32), 0.5)  # -> 3
    await store.nudge(np.full(D, 1.0, np.float32), 2.0)  # -> 5
    await store.mix_in(np.full(D, 1.0, np.float32), 0.5)  # -> 3; in another order, not 3
    np.testing.assert_array_equal((await store.snapshot())[1], 2.0)  # not in a snapshot yet
    assert [c.kind for c in store.pending] == ["mix", "nudge", "mix"]
    store.train(np.full(D, 0.5))  # the changes land, then the step's own update
    np.testing.assert_allclose(store.x, 3.5)
    assert store.step == 1 and store.pending == [] and len(store.landed) == 3


async def test_the_outer_step_is_the_nodes_nesterov_step_behind_the_mixes() -> None:
    """The first outer step anchors the model; each next one applies momentum to the progress
    since, as `OuterStep` does it on the training thread (compared step for step)."""
    rng = np.random.default_rng(1)
    x0 = rng.standard_normal(D).astype(np.float32)
    store, ref, ref_x = InMemoryStore(x0, queued=True), OuterStep(np), x0.copy()
    assert await store.heading() is None
    for _ in range(4):
        other = rng.standard_normal(D).astype(np.float32)
        await store.mix_in(other, 0.5)
        await store.outer_step(0.7, 0.5)
        assert store.pending[-1].kind == "outer"
        store.land()
        ref_x = (0.5 * ref_x + 0.5 * other).astype(np.float32)
        ref.apply(ref_x, 0.7, 0.5)
        np.testing.assert_allclose(store.x, ref_x, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(await store.heading(), ref.back(), rtol=1e-5, atol=1e-6)
    assert store.outer_steps == 3


async def test_an_outer_step_at_lr_one_without_momentum_is_plain_averaging() -> None:
    store = InMemoryStore(np.zeros(D))
    await store.outer_step(1.0, 0.0)  # anchors
    await store.mix_in(np.full(D, 2.0, np.float32), 0.5)
    await store.outer_step(1.0, 0.0)
    np.testing.assert_allclose(store.x, 1.0)


async def test_a_given_heading_is_the_momentum_of_a_peer_mid_run() -> None:
    m = np.linspace(-1, 1, D)
    store = InMemoryStore(np.ones(D), heading=m)
    got = await store.heading()
    np.testing.assert_allclose(got, m)
    got[...] = 0  # a copy
    np.testing.assert_allclose(await store.heading(), m)
