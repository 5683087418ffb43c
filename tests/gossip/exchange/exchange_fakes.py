"""In-memory stand-ins for the exchanger's peer directory (`PeerDirectory`; unit tests; the
model store's twin is `swarmnode.gossip.exchange.InMemoryStore`)."""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np


class FixedPeers:
    """A fixed peer list (none by default), sampled in order: the first k. Every id is a
    member, unless `member` says otherwise."""

    def __init__(
        self, peers: Sequence[tuple[str, str]] = (), member: Callable[[str], bool] | None = None
    ) -> None:
        self.peers, self.member = list(peers), member

    def sample(self, k: int) -> list[tuple[str, str]]:
        return self.peers[:k]

    def is_member(self, peer_id: str) -> bool:
        return self.member is None or self.member(peer_id)


class RandomPeers:
    """A fixed peer list sampled uniformly with a seeded rng."""

    def __init__(self, peers: list[tuple[str, str]], seed: int) -> None:
        self.peers, self.rng = peers, random.Random(seed)

    def sample(self, k: int) -> list[tuple[str, str]]:
        return self.rng.sample(self.peers, min(k, len(self.peers)))

    def is_member(self, peer_id: str) -> bool:
        return True


def spread(exs: list[Any]) -> float:
    """Mean absolute distance of the exchangers' models (their `InMemoryStore`s) from their mean."""
    xs = np.stack([e.store.x for e in exs])
    return float(np.abs(xs - xs.mean(axis=0)).mean())
