"""What the exchange needs from its peer (`ParamStore`, `PeerDirectory`) and what a round
reports (`RoundResult`)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np


class ParamStore(Protocol):
    """The local model as the exchange sees it (implemented by the node over its worker)."""

    size: int

    async def snapshot(self) -> tuple[int, np.ndarray]:
        """(step, a host float32 copy of the parameters) taken between two training steps."""
        ...

    # Optional: `async def snapshot_frame(self, sender: str) -> memoryview` — the snapshot
    # already framed by `swarmnode.gossip.wire.frames.encode_into_frame` (one copy, straight from the model into
    # the frame). Used instead of snapshot() + encode_params when present and honest.

    async def mix_in(self, other: np.ndarray, weight: float) -> None:
        """Queue x <- (1 - weight) x + weight other, to be applied between two training steps.

        Returns once the mix is *queued*, not once it is applied: a `snapshot()` taken right
        after may not contain it yet, and neither an exchange round nor a pushpull answer ever
        waits for a training step. Mixes are applied in the order they were queued. The store
        keeps `other` (it must not be changed by the caller afterwards).
        """
        ...

    # With `compress`: `async def nudge(self, delta, weight)`, x <- x + weight delta, queued.
    # Optional: `async def outer_step(self, lr: float, momentum: float) -> None` — queue an
    # outer step, applied after every mix queued before it (node.mixes.OuterStep). A store
    # without it gets plain mixing. Optional: `async def heading(self) -> np.ndarray | None` —
    # a copy of that step's momentum (gossip.robust.heading bounds robust pulls back along it).


class PeerDirectory(Protocol):
    """Who to talk to (implemented over membership)."""

    def sample(self, k: int) -> list[tuple[str, str]]:
        """Up to k distinct live peers as (peer_id, address), uniformly at random."""
        ...

    # Optional: `def is_member(self, peer_id: str) -> bool` — whether a request's declared
    # sender is a live member; without it (in-process tests) every sender is served.


# Transforms my snapshot before it leaves this peer; the identity for honest peers, a poisoning
# behaviour for byzantine ones (fault/).
Outgoing = Callable[[int, np.ndarray], Awaitable[np.ndarray]]


@dataclass
class RoundResult:
    """What one exchange round did; logged and counted in metrics."""

    mode: str
    asked: list[str] = field(default_factory=list)
    received: list[str] = field(default_factory=list)
    failures: dict[str, str] = field(default_factory=dict)
    applied: bool = False  # a mix was queued into the store (applied at its next step)
    note: str = ""
    duration_s: float = 0.0
