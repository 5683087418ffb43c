"""What the exchange needs from its peer (`ParamStore`, `PeerDirectory`), what an exchange mode
is (`Round`) and asks of its exchanger (`RoundIO`), and what a round reports (`RoundResult`);
`Moved`, the pushes mixed in during a round, which a round hands the delta rule."""

from __future__ import annotations

import threading
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

import numpy as np


class ParamStore(Protocol):
    """The local model as the exchange sees it (implemented by the node over its training
    worker: `node/peer/param_store.py`). Every call that changes the model only *queues* the
    change, applied between two training steps in the order queued; none waits for a step."""

    size: int  # parameters in the flat float32 vector

    async def snapshot(self) -> tuple[int, np.ndarray]:
        """(step, a host float32 copy of the parameters) taken between two training steps."""
        ...

    async def snapshot_frame(self, sender: str) -> memoryview:
        """The same snapshot already framed (`swarmnode.gossip.wire.frames.encode_into_frame`):
        one copy, straight from the model into the frame a push or an answer sends."""
        ...

    async def distance(self, other: np.ndarray) -> float:
        """|x - other| (float64 accumulation) for the model as it is now, read between two
        updates without a copy of it: what the push bound and my round's group are measured
        by. NaN/Inf when `other` holds a non-finite value."""
        ...

    async def norm(self) -> float:
        """|x| now, read the same way (the push bound before my first round)."""
        ...

    async def mix_in(
        self, other: np.ndarray, weight: float, source: str = "", moved: Moved | None = None
    ) -> None:
        """Queue x <- (1 - weight) x + weight other. A `snapshot()` taken right after may not
        contain it yet. The store keeps `other`: the caller must not change it afterwards.
        `source`: the peer that pushed `other` ("" for a round's own mix), so that a mix the
        store rolls back (the node's collapse guard) can be blamed on it. `moved`: my round
        in flight's m, to which the store adds w (other - v) when it queues the mix, v the
        model as it will stand once every change queued before lands: what this mix moves
        (a snapshot taken by the caller misses the mixes queued but not landed yet)."""
        ...

    async def nudge(self, delta: np.ndarray, weight: float) -> None:
        """Queue x <- x + weight delta (the compressed exchange's gossip step on the pair's
        copies, and the delta rule's landing)."""
        ...

    async def outer_step(self, lr: float, momentum: float) -> None:
        """Queue an outer step, applied after every mix queued before it: Nesterov momentum on
        the mixed model's progress since the last round (`node.train.mixing.mixes.OuterStep`)."""
        ...

    async def heading(self) -> np.ndarray | None:
        """A copy of the outer step's momentum, or None before the first outer step: the
        direction this peer is moving in (`swarmnode.gossip.robust.heading` bounds robust pulls
        back along it)."""
        ...


class PeerDirectory(Protocol):
    """Who to talk to (implemented over membership: `node/peer/limits.py`). A directory that
    knows outbound-only members (nobody can dial them) may also offer `sample_partners(k,
    awaitable) -> (to dial, outbound-only ids drawn)`, one uniform draw over both, the second
    among `awaitable` only; the average round then takes the model each drawn one pushes next
    as its answer (gossip/exchange/outbound.py). Without it, rounds draw the dialable members
    alone."""

    def sample(self, k: int) -> list[tuple[str, str]]:
        """Up to k distinct live peers as (peer_id, address), uniformly at random."""
        ...

    def is_member(self, peer_id: str) -> bool:
        """Whether a request's declared sender is a live member (checked where no signature
        names the sender: the in-memory network of the simulations and unit tests)."""
        ...


MOVED_CHUNK = 1 << 16  # elements: the temporaries of one chunk stay in cache


class Moved:
    """m: how far the pushes mixed in during one round of mine moved my model, summed as they
    come (worker threads), so a long round that many peers push to holds one model, not one
    per push. The delta rule (`delta_rule.py`) takes it out of the round's step."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._sum: np.ndarray | None = None

    def add(self, clipped: np.ndarray, own: np.ndarray, weight: float) -> None:
        """x <- (1 - w) x + w clipped moves a model that stands at `own` by w (clipped - own).
        Summed in place chunk by chunk: the round holds the sum, and no push adds a
        model-sized temporary beside it (it was one per push)."""
        w = np.float32(weight)
        a, b = clipped.reshape(-1), own.reshape(-1)
        with self._lock:
            if self._sum is None:
                self._sum = np.subtract(a, b, dtype=np.float32)
                self._sum *= w
                return
            for lo in range(0, a.size, MOVED_CHUNK):
                hi = lo + MOVED_CHUNK
                self._sum[lo:hi] += w * (a[lo:hi] - b[lo:hi])

    def take_from(self, delta: np.ndarray) -> None:
        with self._lock:
            if self._sum is not None:
                delta -= self._sum


@runtime_checkable
class Round(Protocol):
    """One exchange mode, whole (`AverageRound`, `RobustRound`): the exchanger holds one, picked
    by `mode` once at construction, and never asks which. Both halves of a mode live in it
    because they share its state: my own rounds set the bound (radius, consensus, heading) that
    the pushes sent to me are judged by."""

    async def run(self, result: RoundResult, pushed_in: Moved | None) -> None:
        """My own round: gather the others' models, combine them with mine, land the result
        (by the delta rule, counting what `pushed_in` records the pushes moved meanwhile) and
        queue the outer step. What it did goes into `result`; a peer's failure never raises
        (a `SwarmnodeError` of its own may: the exchanger records it)."""
        ...

    async def take_push(self, theirs: np.ndarray, sender: str) -> None:
        """A model `sender` pushed to me (decoded, validated, its answer taken already): judged
        by this mode's bound, within its sender's budget, and mixed in at this mode's weight, or
        not mixed at all (refused, over budget, no radius yet)."""
        ...


class RoundIO(Protocol):
    """What a round object (`AverageRound`, `RobustRound`) asks of its exchanger: the ways of
    gathering the others' models, the outer step, and the byte count."""

    async def pushpull_many(
        self,
        picked: Sequence[tuple[str, str]],
        result: RoundResult,
        awaited: Sequence[str] = (),
    ) -> tuple[list[np.ndarray], np.ndarray]:
        """Push my model to every picked peer at once: their answers (failures recorded in
        `result`), and my model as it was when pushed. `awaited`: outbound-only members drawn
        beside them, not dialled: the model each pushes to me meanwhile is its answer."""
        ...

    async def pull_many(
        self, picked: Sequence[tuple[str, str]], failures: dict[str, str] | None = None
    ) -> list[tuple[str, int, np.ndarray]]:
        """(peer_id, step, parameters) from several peers in parallel; failures recorded."""
        ...

    async def pull_group(
        self, picked: Sequence[tuple[str, str]], result: RoundResult
    ) -> list[tuple[str, int, np.ndarray]]:
        """(peer_id, step, parameters) from several peers at once with a group round's quorum
        and grace: the late ones dropped and sampled less (failures recorded in `result`)."""
        ...

    async def outer_step(self) -> None:
        """Queue the configured outer step after this round's mix."""
        ...

    def count_sent(self, nbytes: int) -> None:
        """Add parameter bytes sent outside `pushpull_many` (a compressed group round)."""
        ...


# Transforms my snapshot before it leaves this peer: `(step, vec, to)`, `to` the peer id it goes
# to ("" when unknown); the identity for honest peers, a poisoning behaviour for byzantine ones
# (fault/; a dissensus liar crafts a model per recipient).
Outgoing = Callable[[int, np.ndarray, str], Awaitable[np.ndarray]]


NO_PEER = "no live peer to average with"  # a round's routine note (all partners backed off)


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
