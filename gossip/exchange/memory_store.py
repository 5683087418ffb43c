"""`InMemoryStore`: the in-process twin of the node's `ParamStore` (`node/peer/param_store.py`),
for tests and simulations, as `InMemoryNetwork` is the twin of the HTTP transport.

A flat float32 vector `x`, a step counter and the outer step (DiLoCo's Nesterov momentum, as
`node.train.mixing.mixes.OuterStep` does it), over no training thread. It keeps the protocol's
contract: a change (`mix_in`, `nudge`, `outer_step`) is queued and lands between two training
steps, in the order queued; none waits for a step. By default a step's boundary follows every
change, so it lands at once (a peer whose model is never busy). With `queued=True` changes wait
for `train()`, the node's timing: a round returns before its mix lands.

Every protocol call is counted in `calls`, every change kept in `pending` and then `landed`, so
that a test reads what the exchange asked of its store instead of writing a store of its own.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

import numpy as np
from swarmnode.gossip.exchange.types import Moved
from swarmnode.gossip.robust import distance as model_distance
from swarmnode.gossip.robust import norm as model_norm
from swarmnode.gossip.wire import encode_into_frame


@dataclass(frozen=True)
class Change:
    """One queued change: a mix (`other`, `weight`, `source`), a nudge (`other` the delta,
    `weight`) or an outer step (`weight` its learning rate, `momentum`)."""

    kind: str  # "mix" | "nudge" | "outer"
    other: np.ndarray | None
    weight: float
    source: str = ""
    momentum: float = 0.0


class InMemoryStore:
    """A `ParamStore` over a plain float32 vector. `heading`, when given, is the outer step's
    momentum as if it had already moved (its anchor the model as given): a peer mid-run."""

    def __init__(
        self,
        x: np.ndarray,
        *,
        step: int = 0,
        queued: bool = False,
        heading: np.ndarray | None = None,
    ) -> None:
        self.x = np.array(x, dtype=np.float32).reshape(-1)
        self.size = int(self.x.size)
        self.step = step
        self.queued = queued
        self.calls: Counter[str] = Counter()
        self.pending: list[Change] = []
        self.landed: list[Change] = []
        self._anchor: np.ndarray | None = None
        self._momentum: np.ndarray | None = None
        self.outer_steps = 0  # outer steps that moved the model (the first only anchors it)
        if heading is not None:
            self._anchor = self.x.copy()
            self._momentum = np.array(heading, dtype=np.float32).reshape(-1)
            self.outer_steps = 1

    # --- the protocol -------------------------------------------------------------------

    async def snapshot(self) -> tuple[int, np.ndarray]:
        self.calls["snapshot"] += 1
        return self.step, self.x.copy()

    async def snapshot_frame(self, sender: str) -> memoryview:
        self.calls["snapshot_frame"] += 1

        def fill(payload: np.ndarray) -> int:
            payload[...] = self.x
            return self.step

        return encode_into_frame(self.size, fill, sender=sender)

    async def distance(self, other: np.ndarray) -> float:
        self.calls["distance"] += 1
        return model_distance(self.x, other)

    async def norm(self) -> float:
        self.calls["norm"] += 1
        return model_norm(self.x)

    async def mix_in(
        self, other: np.ndarray, weight: float, source: str = "", moved: Moved | None = None
    ) -> None:
        self.calls["mix_in"] += 1
        if moved is not None:  # against the model as it will stand, as the node's store does
            moved.add(np.asarray(other, dtype=np.float32).reshape(-1), self._standing(), weight)
        # kept, not copied: the contract says the caller leaves `other` alone from now on
        self._queue(Change("mix", other, weight, source=source))

    async def nudge(self, delta: np.ndarray, weight: float) -> None:
        self.calls["nudge"] += 1
        self._queue(Change("nudge", delta, weight))

    async def outer_step(self, lr: float, momentum: float) -> None:
        self.calls["outer_step"] += 1
        self._queue(Change("outer", None, lr, momentum=momentum))

    async def heading(self) -> np.ndarray | None:
        self.calls["heading"] += 1
        if self._momentum is None or self.outer_steps == 0:
            return None
        return self._momentum.copy()

    # --- the training side --------------------------------------------------------------

    def train(self, delta: np.ndarray | None = None) -> None:
        """One training step: the queued changes land, in order, then `delta` is added."""
        self.land()
        if delta is not None:
            self.x += np.asarray(delta, dtype=np.float32).reshape(-1)
        self.step += 1

    def land(self) -> None:
        """Apply the queued changes in order (what the node does between two steps)."""
        while self.pending:
            change = self.pending.pop(0)
            self._apply(change)
            self.landed.append(change)

    def _standing(self) -> np.ndarray:
        """The model once every mix and nudge queued so far lands (an outer step is queued only
        as a round ends, when no round is in flight to count for)."""
        v = self.x.copy()
        for c in self.pending:
            if c.other is not None:
                w = np.float32(c.weight)
                v = (np.float32(1) - w) * v + w * c.other if c.kind == "mix" else v + w * c.other
        return v.astype(np.float32)

    def _queue(self, change: Change) -> None:
        self.pending.append(change)
        if not self.queued:
            self.land()

    def _apply(self, c: Change) -> None:
        w = np.float32(c.weight)
        if c.other is None:  # an outer step carries no vector
            self._outer(c.weight, c.momentum)
        elif c.kind == "mix":
            self.x = ((np.float32(1) - w) * self.x + w * c.other).astype(np.float32)
        else:
            self.x = (self.x + w * c.other).astype(np.float32)

    def _outer(self, lr: float, beta: float) -> None:
        # m <- beta m + d;  x <- anchor - lr (d + beta m);  anchor <- x, with d = anchor - x
        if self._anchor is None or self._momentum is None:
            self._anchor, self._momentum = self.x.copy(), np.zeros_like(self.x)
            return
        d = self._anchor - self.x
        self._momentum = (np.float32(beta) * self._momentum + d).astype(np.float32)
        self.x = (self._anchor - np.float32(lr) * (d + np.float32(beta) * self._momentum)).astype(
            np.float32
        )
        self._anchor = self.x.copy()
        self.outer_steps += 1
