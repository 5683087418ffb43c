"""The robust round (`--exchange robust`), mixed into `Exchanger` (exchange.py).

Its own module because it is a concern of its own: which f the models gathered allow, and how a
robust rule's aggregate lands; the serving side and the average round do not need it, and
exchange.py had grown past the 400-line guideline with it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np
from swarmnode.gossip import aggregate, delta_rule
from swarmnode.gossip.heading import read_heading, ss_clip_round

if TYPE_CHECKING:
    from swarmnode.gossip.exchange_config import ExchangeConfig
    from swarmnode.gossip.exchange_types import ParamStore, PeerDirectory, RoundResult
    from swarmnode.gossip.push_guard import PushGuard


class RobustRound:
    """`Exchanger._robust_round` and the f it aggregates with. Uses the Exchanger's state."""

    if TYPE_CHECKING:  # provided by Exchanger
        cfg: ExchangeConfig
        store: ParamStore
        peers: PeerDirectory
        clip_tau: float | None
        back: np.ndarray | None
        guard: PushGuard
        _pushed_in: delta_rule.Moved | None

        async def _pushpull_many(
            self, picked: Sequence[tuple[str, str]], result: RoundResult
        ) -> tuple[list[np.ndarray], np.ndarray]: ...
        async def pull_many(
            self,
            picked: Sequence[tuple[str, str]],
            failures: dict[str, str] | None = None,
            timeout: float | None = None,
        ) -> list[tuple[str, int, np.ndarray]]: ...
        async def _outer_step(self) -> None: ...

    async def _robust_round(self, result: RoundResult) -> None:
        picked = self.peers.sample(self.cfg.pull)
        result.asked = [pid for pid, _ in picked]
        # A self-centered rule push-pulls (each side clips what it gets): mixing both ways is
        # what keeps the outer step stable; pull-only mixing with it drifted and, with 8 peers,
        # diverged in scripts/sim_swarm.py. Other rules pull, as they always did.
        self_centered = self.cfg.aggregator in aggregate.SELF_CENTERED
        if self_centered:  # centred on the model pushed: no second snapshot
            received, own = await self._pushpull_many(picked, result)
        else:
            _, own = await self.store.snapshot()
            models = await self.pull_many(picked, result.failures)
            result.received = [pid for pid, _, _ in models]
            received = [vec for _, _, vec in models]
        rows = [own, *received]
        # the distances to my group, as the average round keeps them: read by the status page
        # (how far apart the swarm's models are); robust rounds do not bound pushes by them
        await asyncio.to_thread(self.guard.observe, own, received)
        f = self._fitting_f(len(rows), result)
        if f is None:
            return
        if self_centered:  # pulls back along my heading are cut (gossip/heading.py)
            self.back = await read_heading(self.store, lim := self.cfg.backward_limit)
            self.clip_tau, agg = await asyncio.to_thread(ss_clip_round, rows, f, self.back, lim)
        else:
            agg = await asyncio.to_thread(_aggregate, rows, self.cfg.aggregator, f)
        # a self-centered rule's result already holds my model at its weight: take it as is
        # (by the delta rule: the aggregate plus the steps trained since `own`)
        weight = 1.0 if self_centered else self.cfg.mix
        await delta_rule.land(self.store, [agg], own, weight, self._pushed_in)
        await self._outer_step()
        result.applied = True

    def _fitting_f(self, n: int, result: RoundResult) -> int | None:
        """The f to aggregate n models with, or None (round skipped, reason in result.note)."""
        rule, f = self.cfg.aggregator, self.cfg.byzantine_f
        if n >= aggregate.min_peers(rule, f):
            return f
        if self.cfg.on_short == "shrink":
            for smaller in range(f - 1, -1, -1):
                if n >= aggregate.min_peers(rule, smaller):
                    result.note = f"only {n} models: aggregated with f={smaller} instead of {f}"
                    return smaller
        need = aggregate.min_peers(rule, f)
        result.note = f"only {n} models, {rule} with f={f} needs {need}: round skipped"
        return None


def _aggregate(rows: list[np.ndarray], rule: str, f: int) -> np.ndarray:
    return np.asarray(aggregate.RULES[rule](np.stack(rows), f), dtype=np.float32)
