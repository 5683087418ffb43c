"""What a byzantine peer serves instead of its honest parameters.

An ordinary peer started with `--byzantine KIND` (or turned at runtime) trains as usual but every
snapshot it sends goes through the behaviour from `fault.byzantine`. Colluding kinds (ALIE, IPM,
mimic) need honest peers' current parameters — as the papers' threat model assumes. A background
task (`run`, owned by the node) refreshes them every few seconds; serving only reads that cache, so
a pull is never held up by the network and two colluders pulling from each other cannot deadlock.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import numpy as np

from fault.byzantine import ByzantineError, parse_byzantine

log = logging.getLogger(__name__)

VIEWS = 4  # honest peers a colluder looks at
VIEWS_TTL_S = 2.0


class ByzantineServing:
    """The node's `outgoing` hook: identity when honest, poisoning when byzantine."""

    def __init__(self, spec: str | None, node: Any) -> None:
        self.node = node
        self.behaviour = None
        self._rng = np.random.default_rng(abs(hash(node.peer_id)) % 2**32)
        self._views: list[np.ndarray] = []
        self.set(spec)

    @property
    def kind(self) -> str | None:
        return None if self.behaviour is None else self.behaviour.spec()

    def set(self, spec: str | None) -> None:
        behaviour = parse_byzantine(spec) if spec else None
        if behaviour is not None and behaviour.poisons_labels and self.behaviour is not behaviour:
            if not getattr(self.node, "labels_flipped", False):
                raise ByzantineError("label-flip changes the training data: set it at start")
        self.behaviour = behaviour

    async def outgoing(self, step: int, own: np.ndarray) -> np.ndarray:
        b = self.behaviour
        if b is None or b.poisons_labels:
            return own
        honest = self._views if b.needs_honest_views else None
        if b.needs_honest_views and not honest:
            return own  # nothing to craft from yet: look honest rather than crash
        try:
            return await asyncio.to_thread(b.poison, own, honest, self._rng)
        except ByzantineError as exc:
            log.info("byzantine %s: %s; serving honest parameters", b.spec(), exc)
            return own

    async def run(self) -> None:
        """Keep the colluders' view of honest parameters fresh (cancelled on close)."""
        while True:
            if self.behaviour is not None and self.behaviour.needs_honest_views:
                picked = self.node.exchanger.peers.sample(VIEWS)
                got = await self.node.exchanger.pull_many(picked)
                self._views = [vec for _, _, vec in got]
            await asyncio.sleep(VIEWS_TTL_S)
