"""What a byzantine peer serves instead of its honest parameters.

An ordinary peer started with `--byzantine KIND` (or turned at runtime) trains as usual but every
snapshot it sends goes through the behaviour from `swarmnode.fault.inject.byzantine`.

Colluders. ALIE, IPM, dissensus and mimic craft from honest peers' current parameters, as the
papers' omniscient-colluder threat model assumes. Dissensus crafts for each recipient from that
recipient's own model as the last refresh pulled it (the exchange names who a model goes to). A background task (`run`, owned by the node) refreshes
that view once per exchange round (every `--sync-every` own steps, at most every
`MIN_REFRESH_S`): it pulls every live peer not flagged byzantine, ordered by peer id (at most
`MAX_VIEWS` of them), so colluders look at the same honest set and craft the same vector, and
`mimic:i` copies a fixed peer. Serving only reads the vector crafted from that cache, so a pull
is never held up by the network and all pulls within a round get the same answer.

How colluders recognise each other: each byzantine peer adds `byzantine = KIND` to the small
meta map it gossips with its heartbeat (`META_KEY`), and colluders skip members carrying it.
This stands in for the colluders' private side channel; honest peers never read the key (and
`GET /v1/status` does not show it in member rows), so it gives the defence nothing.

Swarm counts for ALIE's z: n = live peers + 1 and f = live peers flagged byzantine + 1 (self),
unless the spec gives them (`alie:n=5,f=1`).

The reference for update-space attacks (IPM, `sign-flip:update=1`) is where the swarm stood at
the previous refresh, one exchange round ago: the mean of the honest views pulled then (for a
non-colluder, which has no views, its own model then). See fault/inject/byzantine.py for why.

The RNG (gaussian, noise, nan...) is seeded from `--seed` and the CRC-32 of the peer id, so a
rerun with the same ids poisons alike (Python's `hash` of a str is salted per process).

`label-flip` changes the training labels when the peer starts: it can be neither set at runtime
nor left at runtime (the labels would stay flipped while the status said otherwise).
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import zlib
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np
from swarmnode.fault.inject import Behaviour, ByzantineError, parse_byzantine

if TYPE_CHECKING:
    from swarmnode.gossip.exchange import Exchanger
    from swarmnode.gossip.membership import Membership
    from swarmnode.node.peer.param_store import WorkerStore
    from swarmnode.node.settings import PeerConfig
    from swarmnode.node.train import Trainer

log = logging.getLogger(__name__)


class ServingPeer(Protocol):
    """What byzantine serving uses of its peer (the `Node` implements it)."""

    cfg: PeerConfig
    peer_id: str
    membership: Membership
    exchanger: Exchanger
    store: WorkerStore
    trainer: Trainer


META_KEY = "byzantine"  # gossiped member meta: the byzantine kind; colluders skip such peers
MAX_VIEWS = 16  # honest peers a colluder pulls per refresh (the first ones by peer id)
MIN_REFRESH_S = 0.1  # at most ten refreshes a second, however fast the steps go
MAX_REFRESH_S = 2.0  # refresh at least this often, even when training has stopped
STEP_POLL_S = 0.02


@dataclasses.dataclass
class _Craft:
    """One refresh's material: valid only while `base` is the behaviour in force."""

    base: Behaviour
    active: Behaviour  # `base` with the swarm's n and f filled in
    views: np.ndarray | None  # (k, d) honest parameters, ordered by peer id
    reference: np.ndarray | None  # where the swarm stood at the previous refresh
    crafted: np.ndarray | None = None  # what every pull until the next refresh gets
    ids: tuple[str, ...] = ()  # whose model each row of `views` is
    # a per-recipient behaviour (dissensus): what each recipient gets until the next refresh
    per: dict[str, np.ndarray] = dataclasses.field(default_factory=dict)


class ByzantineServing:
    """The node's `outgoing` hook: identity when honest, poisoning when byzantine."""

    def __init__(self, spec: str | None, node: ServingPeer) -> None:
        self.node = node
        self.behaviour: Behaviour | None = None
        self._rng = peer_rng(node.cfg.seed, node.peer_id)
        self._craft: _Craft | None = None
        self._last_mean: np.ndarray | None = None  # the honest (or own) model at the last refresh
        self._flagged = False
        self._changed = asyncio.Event()  # set() wakes the refresh task at once
        self.set(spec)

    @property
    def kind(self) -> str | None:
        return None if self.behaviour is None else self.behaviour.spec()

    def set(self, spec: str | None) -> None:
        """Switch behaviour (None or "": honest); `ByzantineError` for a label-flip change."""
        behaviour = parse_byzantine(spec) if spec else None
        self._check_labels(behaviour)
        self.behaviour = behaviour
        self._craft, self._last_mean = None, None  # crafted for the old behaviour: drop it
        self._flag(behaviour)
        self._changed.set()

    def _check_labels(self, behaviour: Behaviour | None) -> None:
        flipped = bool(getattr(self.node, "labels_flipped", False))
        wants_flip = behaviour is not None and behaviour.poisons_labels
        if wants_flip and not flipped:
            raise ByzantineError("label-flip changes the training data: set it at start")
        if flipped and not wants_flip:
            raise ByzantineError(
                "this peer trains on flipped labels (label-flip at start): it cannot turn "
                f"{'honest' if behaviour is None else behaviour.spec()} at runtime; restart it "
                "without --byzantine"
            )

    def _flag(self, behaviour: Behaviour | None) -> None:
        """Tell the other colluders (only they read the key) whether to skip this peer."""
        if behaviour is None and not self._flagged:
            return  # an honest peer's meta stays as it was
        self.node.membership.set_meta(**{META_KEY: None if behaviour is None else behaviour.KIND})
        self._flagged = behaviour is not None

    async def outgoing(self, step: int, own: np.ndarray, to: str = "") -> np.ndarray:
        """What goes to peer `to` ("" unknown) instead of `own`."""
        b = self.behaviour
        if b is None or b.poisons_labels:
            return own
        if b.per_recipient:
            return await self._serve_to(b, own, to)
        if b.needs_honest_views:
            return await self._serve_crafted(b, own)
        reference = self._last_mean if b.wants_reference else None
        if b.wants_reference and reference is None:
            return own  # no reference yet (first round): look honest rather than crash
        out = await self._poison(b, own, None, reference)
        return own if out is None else out

    async def _serve_crafted(self, b: Behaviour, own: np.ndarray) -> np.ndarray:
        craft = self._craft
        if craft is None or craft.base is not b or craft.views is None:
            return own  # nothing to craft from yet: look honest rather than crash
        if b.wants_reference and craft.reference is None:
            return own
        if craft.crafted is None:  # the first pull since the refresh crafts for all the others
            craft.crafted = await self._poison(craft.active, own, craft.views, craft.reference)
        return own if craft.crafted is None else craft.crafted

    async def _serve_to(self, b: Behaviour, own: np.ndarray, to: str) -> np.ndarray:
        """Crafted from `to`'s own model as the last refresh pulled it; `own` for a recipient
        it has no view of (unknown, or not yet pulled): honest-looking rather than a crash."""
        craft = self._craft
        if craft is None or craft.base is not b or craft.views is None or to not in craft.ids:
            return own
        if to not in craft.per:
            mine = craft.views[craft.ids.index(to)]
            out = await self._poison(craft.active, own, craft.views, craft.reference, mine)
            craft.per[to] = own if out is None else out
        return craft.per[to]

    async def _poison(
        self,
        b: Behaviour,
        own: np.ndarray,
        views: Any,
        reference: np.ndarray | None,
        recipient: np.ndarray | None = None,
    ) -> np.ndarray | None:
        try:
            return await asyncio.to_thread(
                b.poison, own, views, self._rng, reference=reference, recipient=recipient
            )
        except ByzantineError as exc:
            log.info("byzantine %s: %s; serving honest parameters", b.spec(), exc)
            return None

    async def refresh(self) -> None:
        """Pull what the behaviour crafts from: honest views (colluders), own model (others)."""
        b = self.behaviour
        if b is None:
            return
        if b.needs_honest_views:
            await self._refresh_views(b)
        elif b.wants_reference:
            _, own = await self.node.store.snapshot()
            self._last_mean = own

    async def _refresh_views(self, b: Behaviour) -> None:
        honest, n, f = self.swarm()
        got = await self.node.exchanger.pull_many([(m.peer_id, m.addr) for m in honest])
        views, mean = await asyncio.to_thread(_stack_and_mean, [vec for _, _, vec in got])
        active = b
        if views is not None:
            try:
                active = b.with_swarm(n, f)
            except ByzantineError as exc:
                log.info("byzantine %s: %s", b.spec(), exc)
                views = None
        if self.behaviour is b:  # not switched while we pulled
            ids = tuple(pid for pid, _, _ in got)
            self._craft = _Craft(b, active, views, self._last_mean, ids=ids)
            if mean is not None:  # a refresh that got nothing keeps the older reference
                self._last_mean = mean

    def swarm(self) -> tuple[list[Any], int, int]:
        """(the honest live peers to pull, by peer id; n workers; f colluders incl. self)."""
        live = self.node.membership.live_peers()
        honest = sorted((m for m in live if not m.meta.get(META_KEY)), key=lambda m: m.peer_id)
        colluders = len(live) - len(honest) + 1
        return honest[:MAX_VIEWS], len(live) + 1, colluders

    def _needs_refresh(self) -> bool:
        b = self.behaviour
        return b is not None and (b.needs_honest_views or b.wants_reference)

    async def run(self) -> None:
        """Refresh once per exchange round while the behaviour needs it (cancelled on close)."""
        while True:
            if self._needs_refresh():
                await self.refresh()
                await self._next_round()
            else:  # honest, or a kind that crafts from nothing: sleep until `set`
                self._changed.clear()
                await self._changed.wait()

    async def _next_round(self) -> None:
        """Until this peer made `--sync-every` more steps (within the refresh bounds)."""
        target = self.node.trainer.step_count + self.node.cfg.exchange.sync_every
        await asyncio.sleep(MIN_REFRESH_S)
        for _ in range(round((MAX_REFRESH_S - MIN_REFRESH_S) / STEP_POLL_S)):
            if self.node.trainer.step_count >= target:
                return
            await asyncio.sleep(STEP_POLL_S)


def peer_rng(seed: int, peer_id: str) -> np.random.Generator:
    """The byzantine RNG of one peer: the same for the same seed and id in every process."""
    return np.random.default_rng([int(seed) & 0xFFFFFFFF, zlib.crc32(peer_id.encode())])


def _stack_and_mean(vecs: list[np.ndarray]) -> tuple[np.ndarray | None, np.ndarray | None]:
    """(the views as a (k, d) matrix, their float32 mean); (None, None) without any."""
    if not vecs:
        return None, None
    views = np.stack(vecs)
    return views, views.mean(axis=0, dtype=np.float64).astype(np.float32)
