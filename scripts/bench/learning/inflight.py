"""Rounds that take time: the node's group push-pull with a latency, for the lock-step simulator.

scripts/bench/learning/portfolio_sim.py runs a round in no time: every peer in turn takes the
mean of its group while the others wait. A real peer at full speed keeps training while its round
is in flight (node/peer/node.py's exchange loop; the step limit holds it at most `max-lead` x K
steps past its last round's end), so each model it mixes is older than its own by the round's
latency, counted in steps. `InFlightRounds` models that, the node's way:

- at the round's start peer i sends `sent` = x_i to its k partners, and each answers with its
  own model of that moment (before mixing anything);
- halfway through (`push_at` x `latency` steps later) each partner mixes the push in at 1/2,
  between two of its own steps: x_j <- x_j + (sent - x_j) / 2, the move it makes counted in m_j
  when j has a round of its own in flight;
- at the end (`latency` steps after the start) i lands the answers by the node's delta rule
  (gossip/exchange/delta_rule.py): x_i <- x_i + (mean(sent, answers) - sent) - w m_i, w = k / (k
  + 1), then takes its outer step.

The peers' rounds are staggered (`phase`: peer i starts its rounds i P / n steps after peer 0's,
P the period), as real peers' are: released together, they drift apart within a few rounds.
Started all at the same step, every push of a round lands on every peer at once, a burst the
real swarm never sees; with latency 0 the two differ a little even so.

`stale_moved` replays the node's push accounting before 2026-12-02, at its worst: each push of
a burst (every push landing at one step) counted in m against the model before the burst, as a
snapshot taken before the first of them landed saw it. m then overshoots what the pushes moved,
and each landing pushes the peer away from its pushers (portfolio_sim `--latencies p+race`).

`push_base` asks what a push should be mixed against. The node's rule (`now`) pulls j toward a
model `sent` that is older than j's: x_j - sent holds j's own moves since the push started,
and the mix takes half of them back. `start` (x_j <- x_j + (sent - x_j(start)) / 2, a delta
rule on the partner's side: the pair averages their models of one moment and each keeps its
own moves since) is the exact fix; `landings` keeps back only j's own landings since (what its
delta rule and outer step moved it: one model-sized move per landing, and a time to compare with
the push's), and `heading` only its local steps, estimated as age x -lr v_j.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np


@dataclass
class Flight:
    """One peer's round on its way: what it sent, what came back, what pushes moved it since."""

    peer: int
    partners: list[int]
    sent: np.ndarray
    answers: list[np.ndarray]
    start: int
    moved: np.ndarray
    pushed: bool = False


def phase(peer: int, n: int, period: int) -> int:
    """The step within each period at which `peer` of n starts its rounds (0 for peer 0)."""
    return (peer * period) // n


@dataclass
class InFlightRounds:
    """The rounds in flight of a lock-step swarm; `after(i)` runs once i's round has landed."""

    latency: int
    after: Callable[[int], None]
    PUSH_BASES = ("now", "start", "heading", "landings")
    flights: list[Flight] = field(default_factory=list)
    stale_moved: bool = False  # m of a burst counted against the model before it (the race)
    mix: float = 0.5  # the weight a partner mixes the push in at (the node's --mix)
    push_at: float = 0.5  # the fraction of the latency after which the pushes land
    # what a partner j mixes a push against, x_j <- x_j + mix (sent - base) (`PUSH_BASES`)
    push_base: str = "now"
    step_of: Callable[[int], np.ndarray] | None = None  # "heading": j's one step, -lr v_j
    landed: list[tuple[int, int, np.ndarray]] = field(default_factory=list)  # (peer, step, move)

    def __post_init__(self) -> None:
        if self.push_base not in self.PUSH_BASES:
            raise ValueError(f"push_base {self.push_base!r} is none of {self.PUSH_BASES}")
        if self.push_base == "heading" and self.step_of is None:
            raise ValueError("push_base 'heading' needs step_of, a peer's one step")

    def start(
        self, step: int, models: Sequence[np.ndarray], groups: dict[int, Sequence[int]]
    ) -> None:
        """Peer i's round to `groups[i]`, for every i given, at once (all snapshots now); a peer
        whose previous round is still out skips this one (the node runs one round at a time)."""
        busy = {f.peer for f in self.flights}
        for i, others in groups.items():
            if i in busy:
                continue
            snap = [models[j].copy() for j in others]
            flight = Flight(i, list(others), models[i].copy(), snap, step, np.zeros_like(models[i]))
            self.flights.append(flight)
        self.advance(step, models)

    def advance(self, step: int, models: Sequence[np.ndarray]) -> None:
        """Land the pushes and then the answers that are due by `step`, oldest first."""
        before = [m.copy() for m in models] if self.stale_moved else None
        for f in self.flights:
            if not f.pushed and step >= f.start + int(self.latency * self.push_at):
                self._push(f, models, before)
        due = [f for f in self.flights if f.pushed and step >= f.start + self.latency]
        for f in due:
            before_land = models[f.peer].copy() if self.push_base == "landings" else None
            self._land(f, models[f.peer])
            self.flights.remove(f)
            self.after(f.peer)
            if before_land is not None:  # the landing's whole move: delta rule and outer step
                self.landed.append((f.peer, step, models[f.peer] - before_land))
                oldest = step - 2 * self.latency  # no push in flight is older than this
                self.landed = [e for e in self.landed if e[1] > oldest]

    def _push(
        self, f: Flight, models: Sequence[np.ndarray], before: Sequence[np.ndarray] | None
    ) -> None:
        f.pushed = True
        for j, then in zip(f.partners, f.answers, strict=True):
            move = self.mix * (f.sent - self._base(f, j, then, models[j]))
            models[j] += move
            counted = move if before is None else self.mix * (f.sent - before[j])
            for mine in self.flights:  # what the push moved j while j's own round is out
                if mine.peer == j:
                    mine.moved += counted

    def _base(self, f: Flight, j: int, then: np.ndarray, now: np.ndarray) -> np.ndarray:
        """The model of j that f's push is mixed against; `then`: j's at f's start."""
        if self.push_base == "start":
            return then
        if self.push_base == "heading" and self.step_of is not None:
            return now - int(self.latency * self.push_at) * self.step_of(j)
        if self.push_base == "landings":
            mine = [d for p, s, d in self.landed if p == j and s > f.start]
            return now - sum(mine) if mine else now
        return now

    @staticmethod
    def _land(f: Flight, x: np.ndarray) -> None:
        k = len(f.partners)
        mean = (f.sent + sum(f.answers)) / (k + 1)
        x += (mean - f.sent) - (k / (k + 1)) * f.moved
