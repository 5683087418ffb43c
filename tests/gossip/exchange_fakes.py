"""In-memory stand-ins for the exchanger's model store and peer directory (unit tests)."""

from __future__ import annotations

import random
from typing import Any

import numpy as np
from swarmnode.gossip.robust import chunked
from swarmnode.gossip.wire import frames


class PlainStore:
    """The parts of `ParamStore` a unit test does not study, done plainly over `self.x`: a
    framed snapshot encodes `snapshot()`, no outer optimizer (its step is a no-op, so there is
    no heading), and a nudge lands at once."""

    x: np.ndarray

    async def snapshot(self) -> tuple[int, np.ndarray]:
        return 0, self.x.copy()

    async def snapshot_frame(self, sender: str) -> memoryview:
        step, x = await self.snapshot()
        return frames.encode_params(x, sender=sender, step=step)

    async def distance(self, other: np.ndarray) -> float:
        return chunked.distance(self.x, other)

    async def norm(self) -> float:
        return chunked.norm(self.x)

    async def nudge(self, delta: np.ndarray, weight: float) -> None:
        self.x = (self.x + np.float32(weight) * delta).astype(np.float32)

    async def outer_step(self, lr: float, momentum: float) -> None:
        return None

    async def heading(self) -> np.ndarray | None:
        return None


class Store(PlainStore):
    """A model that applies mixes and nudges at once (no training thread)."""

    def __init__(self, x: np.ndarray) -> None:
        self.x = x.astype(np.float32)
        self.size = self.x.size

    async def mix_in(self, other: np.ndarray, weight: float, source: str = "") -> None:
        self.x = ((1 - weight) * self.x + weight * other).astype(np.float32)


class RandomPeers:
    """A fixed peer list sampled uniformly with a seeded rng."""

    def __init__(self, peers: list[tuple[str, str]], seed: int) -> None:
        self.peers, self.rng = peers, random.Random(seed)

    def sample(self, k: int) -> list[tuple[str, str]]:
        return self.rng.sample(self.peers, min(k, len(self.peers)))

    def is_member(self, peer_id: str) -> bool:
        return True


def spread(exs: list[Any]) -> float:
    """Mean absolute distance of the exchangers' models (their `Store`s) from their mean."""
    xs = np.stack([e.store.x for e in exs])
    return float(np.abs(xs - xs.mean(axis=0)).mean())
