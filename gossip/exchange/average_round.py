"""The average round (`--exchange average`, the default): a round object beside `RobustRound`.

Push my snapshot to `group` random live peers at once; each answers with its own snapshot
taken *before* queuing its mix, and sets x_j <- (1 - w) x_j + w x. I take the mean of all k + 1
models, x <- (x + sum_j x_j) / (k + 1), landed by the delta rule (the steps I trained meanwhile
are kept), then the outer step. With `group=1` this is AD-PSGD (Lian et al. 2018).

With `push_budget` on (the default), the answers are bounded first: cut away from where the
swarm was last round (`consensus`, the mean of that round's bounded answers) and clipped like
ss-clip around the model sent (gossip/robust/consensus.py: a dissensus liar's answers).
"""

from __future__ import annotations

import asyncio

import numpy as np
from swarmnode.gossip.exchange import delta_rule
from swarmnode.gossip.exchange.compressed import Compression
from swarmnode.gossip.exchange.config import ExchangeConfig
from swarmnode.gossip.exchange.types import (
    NO_PEER,
    ParamStore,
    PeerDirectory,
    RoundIO,
    RoundResult,
)
from swarmnode.gossip.robust.consensus import AWAY_LIMIT, bound_answers, mean_into
from swarmnode.gossip.robust.push_guard import PushGuard


class AverageRound:
    """One group push-pull and its mean; partners that speak compressed frames get them."""

    def __init__(
        self,
        cfg: ExchangeConfig,
        store: ParamStore,
        peers: PeerDirectory,
        io: RoundIO,
        compression: Compression,
        guard: PushGuard,
    ) -> None:
        self.cfg, self.store, self.peers, self.io = cfg, store, peers, io
        self.compression = compression
        self.guard = guard  # my group's distances set the bound on pushes to me
        self.consensus: np.ndarray | None = None  # where my last round's group was

    async def run(self, result: RoundResult, pushed_in: delta_rule.Moved | None) -> None:
        picked = self.peers.sample(self.cfg.group)
        if not picked:
            result.note = NO_PEER
            return
        result.asked = [pid for pid, _ in picked]
        # pairs that speak compressed frames take that path; the others push-pull plain
        picked, nudged = await self.compression.group_round(picked, self.cfg.mix, result)
        self.io.count_sent(nudged)
        got, sent = await self.io.pushpull_many(picked, result) if picked else ([], None)
        if not got and not nudged:
            return
        # x <- (x + sum_j y_j) / (k + 1) is x <- (1 - w) x + w mean(y), w = k / (k + 1); with
        # one answer that is the configured pairwise weight (AD-PSGD's 1/2 by default)
        if (k := len(got)) and sent is not None:
            # my group's distances set my push bound; to my model now, not to `sent`: the bound
            # judges pushes against the model they land on (to `sent`, closer to the answers,
            # it clipped honest pushes on a busy box)
            self.guard.record([await self.store.distance(y) for y in got])  # no snapshot
            if self.cfg.push_budget:
                got = await asyncio.to_thread(self._bounded, sent, got)
            weight = self.cfg.mix if k == 1 else k / (k + 1)
            await delta_rule.land(self.store, got, sent, weight, pushed_in)
        if self.compression.outer_step_applies:  # not after topk / lowrank rounds
            await self.io.outer_step()
        result.applied = True

    def away_limit(self) -> float:
        """How far one model may pull this peer away from the consensus (an absolute distance:
        `AWAY_LIMIT` x the typical distance; 0 before any)."""
        typical = self.guard.typical()
        return AWAY_LIMIT * typical if typical is not None else 0.0

    def _bounded(self, sent: np.ndarray, got: list[np.ndarray]) -> list[np.ndarray]:
        """The answers bounded (worker thread), and the consensus moved to their mean, written
        over the last one (one model-sized buffer for good, no allocation a round). A push
        judged against it meanwhile (`Exchanger._within_consensus`, another thread) may read a
        consensus between the old and the new: a reference for the cut, never mixed in."""
        out = bound_answers(sent, got, self.consensus, self.guard.radius(), self.away_limit())
        self.consensus = mean_into(out, self.consensus)
        return out
