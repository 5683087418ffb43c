"""node/peer/byzantine_serving.py: what a byzantine peer really serves (colluders, references,
mimic targets), and its RNG."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
from swarmnode.fault.inject.byzantine import (
    ByzantineError,
    alie_z,
)
from swarmnode.gossip.exchange import InMemoryStore
from swarmnode.gossip.exchange.exchanger import ExchangeConfig, Exchanger
from swarmnode.gossip.link.inmemory import InMemoryNetwork
from swarmnode.gossip.membership.table import Member
from swarmnode.node.peer.byzantine_serving import ByzantineServing, peer_rng

D = 1000  # parameters per test vector

ROOT = Path(__file__).resolve().parents[3]


class FakeMembership:
    def __init__(self, live: list[Member]) -> None:
        self.live = live
        self.meta: dict[str, object] = {}

    def live_peers(self) -> list[Member]:
        return list(self.live)

    def set_meta(self, **kv: object) -> None:
        self.meta.update(kv)


def member(peer_id: str, **meta: object) -> Member:
    return Member(peer_id, f"{peer_id}:1", "alive", 1, 1, 0.0, meta)


class Swarm:
    """Honest peers h0..h3 serving fixed models on an in-memory network, and byzantine peers
    whose `ByzantineServing` sits on their real `Exchanger`, as in node/peer/node.py."""

    def __init__(self, rng: np.random.Generator, colluders: dict[str, str]) -> None:
        self.net = InMemoryNetwork()
        self.honest = {f"h{i}": rng.standard_normal(D).astype(np.float32) for i in range(4)}
        self.exchangers: dict[str, Exchanger] = {}
        for pid, vec in {**self.honest, **{c: np.full(D, 7.0) for c in colluders}}.items():
            ex = Exchanger(
                ExchangeConfig(mode="robust"),
                self_id=pid,
                transport=self.net.transport(f"{pid}:1"),
                store=InMemoryStore(vec),
                peers=StaticPeers(),
            )
            self.net.register(f"{pid}:1", ex.handlers())
            self.exchangers[pid] = ex
        # Members in an order that is not the peer-id order: the views must not depend on it.
        self.members = [member(p) for p in reversed(self.honest)]
        self.members += [member(c, byzantine=k.partition(":")[0]) for c, k in colluders.items()]
        self.serving = {c: self._serving(c, k) for c, k in colluders.items()}

    def _serving(self, pid: str, kind: str) -> ByzantineServing:
        ex = self.exchangers[pid]
        node = SimpleNamespace(
            cfg=SimpleNamespace(seed=0),
            peer_id=pid,
            labels_flipped=False,
            membership=FakeMembership([m for m in self.members if m.peer_id != pid]),
            exchanger=ex,
            store=ex.store,
        )
        serving = ByzantineServing(kind, node)
        ex.outgoing = serving.outgoing
        return serving

    async def pull(self, pid: str) -> np.ndarray:
        """What honest h0 gets when it pulls `pid` through the exchange protocol."""
        _, vec = await self.exchangers["h0"].pull(pid, f"{pid}:1")
        return vec

    def move_honest(self, delta: float) -> None:
        for pid in self.honest:
            self.honest[pid] = self.honest[pid] + np.float32(delta)
            self.exchangers[pid].store.x = self.honest[pid]


class StaticPeers:
    def sample(self, k: int) -> list[tuple[str, str]]:
        return []

    def is_member(self, peer_id: str) -> bool:
        return True


async def test_a_colluding_alie_peer_serves_the_crafted_vector() -> None:
    swarm = Swarm(np.random.default_rng(10), {"e": "alie", "f": "alie"})
    assert await swarm.pull("e") == pytest.approx(7.0)  # before any view: looks honest
    for serving in swarm.serving.values():
        await serving.refresh()
    served_e, served_f = await swarm.pull("e"), await swarm.pull("f")
    views = np.stack(list(swarm.honest.values())).astype(np.float64)  # the other colluder: out
    z = alie_z(6, 2)  # n = 5 live others + self, f = the flagged f + self
    expected = views.mean(axis=0) - z * views.std(axis=0)
    np.testing.assert_allclose(served_e, expected, rtol=1e-5, atol=1e-5)
    assert not np.allclose(served_e, swarm.exchangers["e"].store.x)  # not its honest model
    np.testing.assert_array_equal(served_e, served_f)  # colluders agree on one vector
    assert swarm.serving["e"].node.membership.meta == {"byzantine": "alie"}


async def test_a_colluding_ipm_peer_reverses_the_honest_update_since_the_last_round() -> None:
    swarm = Swarm(np.random.default_rng(11), {"e": "ipm:0.5"})
    serving = swarm.serving["e"]
    await serving.refresh()
    before = np.stack(list(swarm.honest.values())).mean(axis=0)
    assert await swarm.pull("e") == pytest.approx(7.0)  # no reference yet: looks honest
    swarm.move_honest(0.2)  # one round of honest progress
    await serving.refresh()
    served = await swarm.pull("e")
    after = np.stack(list(swarm.honest.values())).mean(axis=0)
    np.testing.assert_allclose(served, before - 0.5 * (after - before), rtol=1e-5, atol=1e-5)
    assert float((served - before) @ (after - before)) < 0  # the served update opposes theirs


async def test_mimic_copies_the_same_honest_peer_whatever_the_member_order() -> None:
    swarm = Swarm(np.random.default_rng(12), {"e": "mimic:1"})
    serving = swarm.serving["e"]
    for order in (swarm.members, swarm.members[::-1]):
        serving.node.membership.live = [m for m in order if m.peer_id != "e"]
        await serving.refresh()
        np.testing.assert_array_equal(await swarm.pull("e"), swarm.honest["h1"])


async def test_sign_flip_update_mode_flips_its_own_progress_since_the_last_round() -> None:
    swarm = Swarm(np.random.default_rng(13), {"e": "sign-flip:update=1"})
    serving, store = swarm.serving["e"], swarm.exchangers["e"].store
    assert await swarm.pull("e") == pytest.approx(7.0)  # no reference yet
    await serving.refresh()
    store.x = store.x + np.float32(0.1)
    np.testing.assert_allclose(await swarm.pull("e"), 6.9, atol=1e-5)  # 7 - (7.1 - 7)


def test_label_flip_can_neither_start_nor_stop_at_runtime() -> None:
    node = SimpleNamespace(
        cfg=SimpleNamespace(seed=0), peer_id="p", labels_flipped=True, membership=FakeMembership([])
    )
    serving = ByzantineServing("label-flip", node)
    assert node.membership.meta == {"byzantine": "label-flip"}
    for spec in (None, "gaussian"):
        with pytest.raises(ByzantineError, match="trains on flipped labels"):
            serving.set(spec)
    assert serving.kind == "label-flip"
    node.labels_flipped = False
    honest = ByzantineServing(None, node)
    with pytest.raises(ByzantineError, match="set it at start"):
        honest.set("label-flip")
    honest.set("gaussian")
    honest.set(None)
    assert node.membership.meta["byzantine"] is None  # turned honest: no longer skipped


@pytest.mark.slow  # a second interpreter draws the same numbers
def test_the_byzantine_rng_depends_on_seed_and_id_not_on_the_process() -> None:
    code = "from swarmnode.node.peer.byzantine_serving import peer_rng; print(peer_rng(3, 'peer-x').random())"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    draws = {
        subprocess.run(
            [sys.executable, "-c", code],
            env={**env, "PYTHONHASHSEED": salt},
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        for salt in ("1", "2")
    }
    assert draws == {f"{peer_rng(3, 'peer-x').random()}\n"}
    assert peer_rng(3, "peer-x").random() != peer_rng(3, "peer-y").random()
    assert peer_rng(3, "peer-x").random() != peer_rng(4, "peer-x").random()
