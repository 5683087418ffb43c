"""What both round objects share when a model is pushed to this peer (`Round.take_push`).

A mode decides the radius a push is judged by, its weight, and what it does before the bound
(the average mode's in-place path and consensus cut, the robust mode's heading); the rest is
one mechanism for both (gossip/robust/push_guard.py, push_budget.py): the sender's budget is
asked first, then the push is clipped against a snapshot of my model, its travel spent, counted
by my own round in flight (the delta rule) and queued into the store.
"""

from __future__ import annotations

import asyncio
import logging

import numpy as np
from swarmnode.gossip.exchange import delta_rule
from swarmnode.gossip.exchange.types import ParamStore
from swarmnode.gossip.robust import PushBudget, PushGuard, bound_push, distance

log = logging.getLogger(__name__)


class Pushes:
    """The push bounds a peer keeps (its guard and its senders' budget) and the mix both modes
    end a push with. One per exchanger, shared by its round object."""

    def __init__(self, store: ParamStore, guard: PushGuard, budget: PushBudget) -> None:
        self.store, self.guard, self.budget = store, guard, budget
        # while my own round is in flight (set by the exchanger): how each push mixed in
        # meanwhile moved me, for `delta_rule.land`
        self.in_flight: delta_rule.Moved | None = None
        self.mixed = 0  # pushed models mixed in, clipped or whole (status: `pushes_mixed`)

    def allowance(
        self, sender: str, tau: float | None, weight: float, budgeted: bool
    ) -> tuple[bool, float | None]:
        """(whether `sender`'s push may be mixed at all, the clip its travel budget leaves, None
        for none). Without a radius the budget is not asked: the bound refuses the push."""
        if tau is None or not budgeted:
            return True, None
        clip = self.budget.allow(sender, tau, weight)
        if clip is None:
            log.debug("a push from %s is answered, not mixed: over its budget", sender)
            return False, None
        return True, clip

    async def mix_bounded(
        self,
        own: np.ndarray,
        theirs: np.ndarray,
        sender: str,
        *,
        tau: float | None,
        weight: float,
        clip: float | None,
        back: np.ndarray | None,
        backward_limit: float,
        budgeted: bool,
    ) -> None:
        """`theirs` bounded against `own` (a snapshot of my model): cut along my heading `back`
        (None: no cut), clipped to tau (and `clip`), its travel spent, counted by my round in
        flight, and queued at `weight`; not mixed where the bound refuses it."""
        args = (own, theirs, tau, back, backward_limit, sender, clip)
        clipped = await asyncio.to_thread(bound_push, self.guard, *args)
        if clipped is None:
            return
        if budgeted:
            moved = weight * await asyncio.to_thread(distance, own, clipped)
            self.budget.spend(sender, moved)
        # my own round in flight counts the move (`delta_rule.land`), where the store queues
        # it: against my model with what is queued before it, not the snapshot `own`. Two
        # edges stay uncounted, both harmless (the push keeps its whole move, toward its
        # sender): one folded after the landing has read m, and one queued before my round's
        # snapshot that lands after it
        await self.store.mix_in(clipped, weight, source=sender, moved=self.in_flight)
        self.mixed += 1
