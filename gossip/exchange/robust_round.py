"""The robust round (`--exchange robust`): a round object beside `AverageRound`
(average_round.py).

Its own module because it is a concern of its own: which f the models gathered allow, how a
robust rule's aggregate lands, and the state a self-centered rule keeps between rounds (the clip
radius and the heading), which a model pushed to me is judged by (`take_push`).
"""

from __future__ import annotations

import asyncio

import numpy as np
from swarmnode.gossip.exchange import delta_rule
from swarmnode.gossip.exchange.compressed import Compression
from swarmnode.gossip.exchange.config import ExchangeConfig
from swarmnode.gossip.exchange.pushes import Pushes
from swarmnode.gossip.exchange.types import ParamStore, PeerDirectory, RoundIO, RoundResult
from swarmnode.gossip.robust import RULES, SELF_CENTERED, krum_scores, min_peers, ss_clip_round


class RobustRound:
    """Pull (or push-pull) `pull` peers, aggregate {own} U {received} with a robust rule, land
    the aggregate by the delta rule, then the outer step."""

    def __init__(
        self,
        cfg: ExchangeConfig,
        store: ParamStore,
        peers: PeerDirectory,
        io: RoundIO,
        pushes: Pushes,
        compression: Compression,  # unused: a robust rule needs whole models (`Uncompressed`)
    ) -> None:
        self.cfg, self.store, self.peers, self.io = cfg, store, peers, io
        self.pushes = pushes
        self.guard = pushes.guard  # keeps my group's distances (read as the consensus distance)
        # a self-centered rule: the clip radius of my last round; a model pushed to me is
        # mixed in only clipped to it (none before my first round: pushes are then not mixed)
        self.clip_tau: float | None = None
        self.back: np.ndarray | None = None  # my outer momentum at my last round (its heading)

    async def run(self, result: RoundResult, pushed_in: delta_rule.Moved | None) -> None:
        picked = self.peers.sample(self.cfg.pull)
        result.asked = [pid for pid, _ in picked]
        # A self-centered rule push-pulls (each side clips what it gets): mixing both ways is
        # what keeps the outer step stable; pull-only mixing with it drifted and, with 8 peers,
        # diverged in the simulator. Other rules pull, as they always did.
        self_centered = self.cfg.aggregator in SELF_CENTERED
        if self_centered:  # centred on the model pushed: no second snapshot
            received, own = await self.io.pushpull_many(picked, result)
        else:
            _, own = await self.store.snapshot()
            # with a group round's quorum and grace: a slow partner costs the round its grace,
            # not its answer time; the rule's bound is kept below (`_fitting_f`: too few
            # models after the grace and the round is skipped, never aggregated over them)
            models = await self.io.pull_group(picked, result)
            received = [vec for _, _, vec in models]
        rows = [own, *received]
        # the distances to my group, as the average round keeps them: read by the status page
        # (how far apart the swarm's models are); robust rounds do not bound pushes by them
        await asyncio.to_thread(self.guard.observe, own, received)
        f = self._fitting_f(len(rows), result)
        if f is None:
            return
        if self_centered:  # pulls back along my heading are cut (gossip/robust/heading.py)
            lim = self.cfg.backward_limit
            self.back = await self.store.heading() if lim > 0 else None
            self.clip_tau, agg = await asyncio.to_thread(ss_clip_round, rows, f, self.back, lim)
        else:
            agg = await asyncio.to_thread(_aggregate, rows, self.cfg.aggregator, f)
        # a self-centered rule's result already holds my model at its weight: take it as is
        # (by the delta rule: the aggregate plus the steps trained since `own`)
        weight = 1.0 if self_centered else self.cfg.mix
        await delta_rule.land(self.store, [agg], own, weight, pushed_in)
        await self.io.outer_step()
        result.applied = True

    async def take_push(self, theirs: np.ndarray, sender: str) -> None:
        """A push mixed in only as own + clip(theirs - own, tau), tau the clip radius of my
        last round (none before it: not mixed), cut along my heading, within its sender's
        budget (gossip/robust/push_budget.py). Its weight is 1 / (pull + 1), the weight each
        model has in my own round: a peer is pushed to about `pull` times per round of its
        own, and a liar pushing at every round of its own must not get more say than in an
        aggregate (at 1/2 an ALIE liar took the swarm to 21%)."""
        tau = self.clip_tau
        weight = 1.0 / (self.cfg.pull + 1)
        allowed, clip = self.pushes.allowance(sender, tau, weight, self.cfg.push_budget)
        if not allowed:
            return
        _, own = await self.store.snapshot()
        await self.pushes.mix_bounded(
            own, theirs, sender, tau=tau, weight=weight, clip=clip, back=self.back,
            backward_limit=self.cfg.backward_limit, budgeted=self.cfg.push_budget,
        )  # fmt: skip

    def _fitting_f(self, n: int, result: RoundResult) -> int | None:
        """The f to aggregate n models with, or None (round skipped, reason in result.note)."""
        rule, f = self.cfg.aggregator, self.cfg.byzantine_f
        if n >= min_peers(rule, f):
            return f
        if self.cfg.on_short == "shrink":
            for smaller in range(f - 1, -1, -1):
                if n >= min_peers(rule, smaller):
                    result.note = f"only {n} models: aggregated with f={smaller} instead of {f}"
                    return smaller
        need = min_peers(rule, f)
        result.note = f"only {n} models, {rule} with f={f} needs {need}: round skipped"
        return None


def _aggregate(rows: list[np.ndarray], rule: str, f: int) -> np.ndarray:
    if rule == "krum":
        return _krum_of_received(rows, f)
    return np.asarray(RULES[rule](np.stack(rows), f), dtype=np.float32)


def _krum_of_received(rows: list[np.ndarray], f: int) -> np.ndarray:
    """Krum's pick among the models received (rows[1:]); my own (rows[0]) counts in every
    score but is never the pick. Picked, my own makes the round a no-op, and it wins where the
    others were mixed toward it: every peer then takes one hub's model and the hub nobody's
    (a star: the hub picked itself in 72-95% of its rounds, the others in 0-4%), so each peer
    learns little beyond its own shard and the hub nothing (docs/benchmarks.md, "The suite")."""
    scores = krum_scores(np.stack(rows), f)  # raises when too few rows are finite
    return np.asarray(rows[1 + int(np.argmin(scores[1:]))], dtype=np.float32).copy()
