"""`ExchangeConfig`: how a peer exchanges parameters (mode, group, outer step, robust rule,
compression, deadlines), validated; and the exchange's error."""

from __future__ import annotations

from dataclasses import dataclass

from swarmnode.gossip.errors import ExchangeError
from swarmnode.gossip.exchange import compressed as cx
from swarmnode.gossip.robust import BACKWARD_LIMIT, RULES, min_peers

MODES = ("average", "robust")
SHORT_POLICIES = ("skip", "shrink")


@dataclass(frozen=True)
class ExchangeConfig:
    """How and how often a peer exchanges parameters."""

    mode: str = "average"
    sync_every: int = 10  # local steps between two exchanges
    pull: int = 4  # robust: peers pulled per round
    aggregator: str = "ss-clip"  # robust: a name in swarmnode.gossip.robust.aggregate.RULES
    byzantine_f: int = 1  # robust: liars the rule must tolerate
    timeout: float = 5.0  # deadline of every exchange request, seconds
    mix: float = 0.5  # weight of the received / aggregated model in x <- (1-w) x + w y
    group: int = 3  # average: peers pushed to at once; the initiator takes the mean of all
    outer_lr: float = 0.7  # outer step on the mixed model (1.0 with momentum 0: none)
    outer_momentum: float = 0.5  # Nesterov momentum of the outer step (0.9 broke a conv net)
    backward_limit: float = BACKWARD_LIMIT  # robust: pull back along m cut to this x |m| (0: off)
    on_short: str = "skip"  # robust round with too few models: skip it, or shrink f to fit
    max_inflight: int = 4  # concurrent inbound bulk requests (bounds memory: one model each)
    compress: str = "none"  # none|fp16|int8|topk:RATIO|topk2:D|lowrank:R (exchange.compressed)
    delta_rule: bool = True  # keep the steps taken during a round (delta_rule.land)
    # the bounds on a hostile insider (docs/security.md): per-sender push budget and travel,
    # anchored radius, bounded answers and the consensus cut (average), the node's collapse guard
    push_budget: bool = True

    def validate(self) -> ExchangeConfig:
        if self.mode not in MODES:
            raise ExchangeError(
                f"unknown exchange mode {self.mode!r} (expected {', '.join(MODES)})"
            )
        if self.aggregator not in RULES:
            known = ", ".join(sorted(RULES))
            raise ExchangeError(f"unknown aggregator {self.aggregator!r} (expected one of {known})")
        if (why := cx.check_config(self.mode, self.compress)) is not None:
            raise ExchangeError(why)
        if self.on_short not in SHORT_POLICIES:
            raise ExchangeError(f"`on_short` must be skip or shrink, got {self.on_short!r}")
        checks = {
            "sync_every": self.sync_every >= 1,
            "pull": self.pull >= 1,
            "byzantine_f": self.byzantine_f >= 0,
            "timeout": self.timeout > 0,
            "mix": 0 < self.mix <= 1,
            "group": self.group >= 1,
            "outer_lr": 0 < self.outer_lr <= 2,
            "outer_momentum": 0 <= self.outer_momentum < 1,
            "max_inflight": self.max_inflight >= 1,
            "backward_limit": self.backward_limit >= 0,
        }
        for name, ok in checks.items():
            if not ok:
                raise ExchangeError(f"`{name}` has an invalid value: {getattr(self, name)!r}")
        if self.mode == "robust":
            need = min_peers(self.aggregator, self.byzantine_f)
            if self.pull + 1 < need:
                raise ExchangeError(
                    f"`aggregator` {self.aggregator} with `byzantine_f` {self.byzantine_f} needs "
                    f"{need} models per round, but `pull` {self.pull} gives at most {self.pull + 1}"
                )
        return self
