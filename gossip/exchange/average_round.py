"""The average round (`--exchange average`, the default): a round object beside `RobustRound`.

Push my snapshot to `group` random live peers at once; each answers with its own snapshot
taken *before* queuing its mix, and sets x_j <- (1 - w) x_j + w x. I take the mean of all k + 1
models, x <- (x + sum_j x_j) / (k + 1), landed by the delta rule (the steps I trained meanwhile
are kept), then the outer step. With `group=1` this is AD-PSGD (Lian et al. 2018).

With `push_budget` on (the default), the answers are bounded first: cut away from where the
swarm was last round (`consensus`, the mean of that round's bounded answers) and clipped like
ss-clip around the model sent (gossip/robust/consensus.py: a dissensus liar's answers).

A model pushed to me (`take_push`) is judged against the radius of my group's distances, mixed
at `mix`, and where it can be, judged in place (`ParamStore.distance`: no snapshot of my model).

Outbound-only members (nobody can dial them) are drawn too, where the directory can tell them
apart (`sample_partners`): not dialled but awaited, the model each pushes to me while my round
is out is its answer (gossip/exchange/outbound.py).
"""

from __future__ import annotations

import asyncio
import math

import numpy as np
from swarmnode.gossip.exchange import delta_rule
from swarmnode.gossip.exchange.compressed import Compression
from swarmnode.gossip.exchange.config import ExchangeConfig
from swarmnode.gossip.exchange.outbound import PushDistances
from swarmnode.gossip.exchange.pushes import Pushes
from swarmnode.gossip.exchange.types import (
    NO_PEER,
    ParamStore,
    PeerDirectory,
    RoundIO,
    RoundResult,
)
from swarmnode.gossip.robust import (
    AWAY_LIMIT,
    PUSH_CLIP_SHARE,
    bound_answers,
    cut_away,
    cut_shift,
    distance,
    mean_into,
)


class AverageRound:
    """One group push-pull and its mean; partners that speak compressed frames get them."""

    def __init__(
        self,
        cfg: ExchangeConfig,
        store: ParamStore,
        peers: PeerDirectory,
        io: RoundIO,
        pushes: Pushes,
        compression: Compression,
    ) -> None:
        self.cfg, self.store, self.peers, self.io = cfg, store, peers, io
        self.compression = compression
        self.pushes = pushes
        self.guard = pushes.guard  # my group's distances set the bound on pushes to me
        self.consensus: np.ndarray | None = None  # where my last round's group was
        self.seen = PushDistances()  # each sender's latest push: who may be drawn, how far

    async def run(self, result: RoundResult, pushed_in: delta_rule.Moved | None) -> None:
        picked, drawn = self._partners()
        if not picked and not drawn:
            result.note = NO_PEER
            return
        result.asked = [pid for pid, _ in picked] + drawn
        # pairs that speak compressed frames take that path; the others push-pull plain
        picked, nudged = await self.compression.group_round(picked, self.cfg.mix, result)
        self.io.count_sent(nudged)
        ask = picked or drawn
        got, sent = await self.io.pushpull_many(picked, result, drawn) if ask else ([], None)
        # my group's distances set my push bound: a drawn member whose push did not come in
        # time answers for it by its latest (one record a round: the radius grows by at most
        # GROWTH a round); to my model now, not to `sent`: the bound judges pushes against the
        # model they land on (to `sent`, closer to the answers, it clipped honest pushes on a
        # busy box)
        near = [await self.store.distance(y) for y in got] if sent is not None else []
        by_push = self.seen.of(pid for pid in drawn if pid not in result.received)
        if near or by_push:
            self.guard.record(near + by_push)  # no snapshot
        if not got and not nudged:
            return
        # x <- (x + sum_j y_j) / (k + 1) is x <- (1 - w) x + w mean(y), w = k / (k + 1); with
        # one answer that is the configured pairwise weight (AD-PSGD's 1/2 by default)
        if (k := len(got)) and sent is not None:
            if self.cfg.push_budget:
                got = await asyncio.to_thread(self._bounded, sent, got)
            weight = self.cfg.mix if k == 1 else k / (k + 1)
            await delta_rule.land(self.store, got, sent, weight, pushed_in)
        if self.compression.outer_step_applies:  # not after topk / lowrank rounds
            await self.io.outer_step()
        result.applied = True

    def _partners(self) -> tuple[list[tuple[str, str]], list[str]]:
        """(the partners to dial, the outbound-only ones drawn beside them): one uniform draw
        of `group` over both, where the directory tells them apart."""
        split = getattr(self.peers, "sample_partners", None)
        candidates = self.seen.fresh() if split is not None else set()
        if not candidates:
            return self.peers.sample(self.cfg.group), []
        return split(self.cfg.group, candidates)

    def away_limit(self) -> float:
        """How far one model may pull this peer away from the consensus (an absolute distance:
        `AWAY_LIMIT` x the typical distance; 0 before any)."""
        typical = self.guard.typical()
        return AWAY_LIMIT * typical if typical is not None else 0.0

    def _bounded(self, sent: np.ndarray, got: list[np.ndarray]) -> list[np.ndarray]:
        """The answers bounded (worker thread), and the consensus moved to their mean, written
        over the last one (one model-sized buffer for good, no allocation a round). A push
        judged against it meanwhile (`_within_consensus`, another thread) may read a
        consensus between the old and the new: a reference for the cut, never mixed in."""
        out = bound_answers(sent, got, self.consensus, self.guard.radius(), self.away_limit())
        self.consensus = mean_into(out, self.consensus)
        return out

    # --- a model pushed to me --------------------------------------------------------------

    async def take_push(self, theirs: np.ndarray, sender: str) -> None:
        """A push mixed in only as own + clip(theirs - own, tau) (ClippedGossip, He et al.
        2022), tau from my group's distances (gossip/robust/push_guard.py), at `mix`: a liar
        moves me by at most tau x mix per push; and per sender at most about one push per own
        round, and `travel` x tau over eight own rounds (gossip/robust/push_budget.py). `own`
        is my model now, not the snapshot the answer carried: the radius was tuned on
        distances to the current model (with the answer's snapshot the worst of 4 iid peers on
        the signal task fell from ~78% to 75-77%). Its distance is kept: where a round of mine
        draws its sender without dialling it (outbound-only), it answers for my radius."""
        dist = await self.store.distance(theirs)
        self.seen.pushed(sender, dist)
        # before my first round: factor x |own| (`PushGuard.first_radius`), read in place
        tau = self.guard.radius() or self.guard.radius_of_norm(await self.store.norm())
        weight = self.cfg.mix
        allowed, clip = self.pushes.allowance(sender, tau, weight, self.cfg.push_budget)
        if not allowed:
            return
        if clip is not None and tau is not None:  # the budget's clip, at most a share of tau
            clip = min(clip, PUSH_CLIP_SHARE * tau)
        if await self._mix_measured(theirs, sender, tau, clip, dist):
            return
        await self._mix_from_snapshot(theirs, sender, tau, weight, clip)

    async def _mix_measured(
        self, theirs: np.ndarray, sender: str, tau: float | None, clip: float | None, dist: float
    ) -> bool:
        """The usual push, judged by its distances to my model (read in place,
        `ParamStore.distance`: no snapshot of it) and mixed, or refused. A push to clip is mixed
        as it came at a smaller weight: (1 - w) x + w (x + s (y - x)) is (1 - ws) x + ws y.
        False where the bound needs my model itself: a cut away from the consensus. `dist`:
        |theirs - x|, measured already."""
        verdict = self.guard.judge(dist, tau, sender)
        if verdict == "refuse" or tau is None:
            return True
        # the guard's verdict bounds by tau ("clip": beyond it), the sender's budget by `clip`
        bound = tau if verdict == "clip" else math.inf
        if clip is not None:
            bound = min(bound, clip)
        scale = 1.0 if dist <= bound else bound / dist
        if self.cfg.push_budget and not await self._within_consensus(theirs, dist):
            return False
        # a clip is a smaller weight: my round in flight counts the move at it (the store
        # measures it against my model and what is queued before it: no snapshot needed)
        moved = self.pushes.in_flight
        await self.store.mix_in(theirs, self.cfg.mix * scale, source=sender, moved=moved)
        self.pushes.mixed += 1
        if self.cfg.push_budget:
            self.pushes.budget.spend(sender, self.cfg.mix * min(dist, bound))
            self.pushes.budget.pushed(sender, cut=False)
        return True

    async def _within_consensus(self, theirs: np.ndarray, dist: float) -> bool:
        """Whether `cut_away` would leave `theirs` as it is, from distances alone (`cut_shift`:
        |theirs - own| known, |own - c| read in place, |theirs - c|; no snapshot of my model)."""
        consensus, limit = self.consensus, self.away_limit()
        if consensus is None or not limit > 0:
            return True
        own_to_c = await self.store.distance(consensus)
        to_c = await asyncio.to_thread(distance, theirs, consensus)
        return cut_shift(dist, own_to_c, to_c, limit) == 0.0

    async def _mix_from_snapshot(
        self, theirs: np.ndarray, sender: str, tau: float | None, weight: float, clip: float | None
    ) -> None:
        """A push bounded against a snapshot of my model: cut away from where my group was
        (with the budget on), then the shared bound and mix."""
        _, own = await self.store.snapshot()
        if self.cfg.push_budget:  # away from where my group was: cut
            args = (own, theirs, self.consensus, self.away_limit())
            cut = await asyncio.to_thread(cut_away, *args)
            self.pushes.budget.pushed(sender, cut is not theirs)
            theirs = cut
        await self.pushes.mix_bounded(
            own, theirs, sender, tau=tau, weight=weight, clip=clip, back=None,
            backward_limit=self.cfg.backward_limit, budgeted=self.cfg.push_budget,
        )  # fmt: skip
