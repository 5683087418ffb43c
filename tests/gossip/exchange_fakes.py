"""In-memory stand-ins for the exchanger's model store and peer directory (unit tests)."""

from __future__ import annotations

import random
from typing import Any

import numpy as np


class Store:
    """A model that applies mixes and nudges at once (no training thread)."""

    def __init__(self, x: np.ndarray) -> None:
        self.x = x.astype(np.float32)
        self.size = self.x.size

    async def snapshot(self) -> tuple[int, np.ndarray]:
        return 0, self.x.copy()

    async def mix_in(self, other: np.ndarray, weight: float) -> None:
        self.x = ((1 - weight) * self.x + weight * other).astype(np.float32)

    async def nudge(self, delta: np.ndarray, weight: float) -> None:
        self.x = self.x + np.float32(weight) * delta


class RandomPeers:
    """A fixed peer list sampled uniformly with a seeded rng."""

    def __init__(self, peers: list[tuple[str, str]], seed: int) -> None:
        self.peers, self.rng = peers, random.Random(seed)

    def sample(self, k: int) -> list[tuple[str, str]]:
        return self.rng.sample(self.peers, min(k, len(self.peers)))


def spread(exs: list[Any]) -> float:
    """Mean absolute distance of the exchangers' models (their `Store`s) from their mean."""
    xs = np.stack([e.store.x for e in exs])
    return float(np.abs(xs - xs.mean(axis=0)).mean())
