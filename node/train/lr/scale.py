"""`SwarmLR`: the local learning rate scaled with the swarm size, elastic, with a warm-up.

A swarm of n peers that average their models every few steps computes like one peer with an
n times larger batch; at the same learning rate it also moves like one, taking no larger steps
for the extra samples (measured in scripts/sim/swarm.py: the worst peer reached the single
peer's accuracy in as many steps as the single peer). The linear scaling rule (Goyal et al.
2017, "Accurate, large minibatch SGD") scales the lr by n, `sqrt` by sqrt(n) (gentler, for
models that do not take the linear rule). `adaptive` scales it by the gain ratio measured from
the peer's own gradient noise (node/train/lr/gain.py, AdaScale): ~n where one batch's gradient is
mostly noise, ~1 where it is mostly signal, in between otherwise.

The swarm size comes from membership and changes as peers join and leave, so the scale is
elastic, with a hysteresis that errs towards safety:

- it *rises* towards the target f(n) linearly, by (f(n) - 1) / `warmup` per step (Goyal's
  gradual warm-up, also after a join that grows n: the new peers' models are not averaged in
  yet when the membership already lists them);
- it *falls* at once when n shrinks: fewer models average away less gradient noise, and a
  too-large lr is what diverges.

n is capped at `max_n`: membership is gossip, and a peer holding the swarm secret can list
sybil members; the cap bounds what it buys (a lr at most f(max_n) x the base, not unbounded).
A peer alone (n = 1) trains at exactly its base lr.
"""

from __future__ import annotations

import math

from swarmnode.node.train.lr.gain import GainRatio, HalfBatchProbe

RULES = ("none", "sqrt", "linear", "adaptive")


class SwarmLR:
    """The scale of one peer's lr; `set_size` from any thread, `advance` from the training one
    (a float attribute written whole: no lock needed)."""

    def __init__(self, rule: str = "none", max_n: int = 8, warmup: int = 0) -> None:
        if rule not in RULES:
            raise ValueError(f"lr scale rule must be one of {', '.join(RULES)}, got {rule!r}")
        if max_n < 1 or warmup < 0:
            raise ValueError(f"need max_n >= 1 and warmup >= 0, got {max_n} and {warmup}")
        self.rule = rule
        self.max_n = max_n
        self.warmup = warmup
        self.n = 1
        self.scale = 1.0
        # adaptive: fed by the trainer's half-batch probe (the worker installs it)
        self.gain = GainRatio() if rule == "adaptive" else None
        self._probe = HalfBatchProbe(self.gain) if self.gain is not None else None

    def set_size(self, n: int) -> None:
        """The number of peers in the swarm, this one included (live members + 1)."""
        self.n = max(1, min(int(n), self.max_n))

    def target(self) -> float:
        if self.rule == "linear":
            return float(self.n)
        if self.rule == "sqrt":
            return math.sqrt(self.n)
        if self.gain is not None:
            return self.gain.ratio(self.n)
        return 1.0

    @property
    def probe(self) -> HalfBatchProbe | None:
        """What the trainer should measure its gradient noise with: only `adaptive`, and only
        in a swarm (a peer alone steps exactly as it would without the rule)."""
        return self._probe if self.n > 1 else None

    def advance(self) -> float:
        """One step's scale: at most one warm-up increment above the last, never above the
        target (and at once down to it)."""
        goal = self.target()
        if goal <= self.scale or self.warmup == 0:
            self.scale = goal
        else:
            self.scale = min(goal, self.scale + (goal - 1.0) / self.warmup)
        return self.scale
