"""`MembershipConfig`: the gossip and failure-detector settings of one peer, validated."""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any

from swarmnode.gossip.errors import MembershipError
from swarmnode.gossip.membership.caps import DEFAULT_PER_HOST
from swarmnode.gossip.membership.failure import timing_problems
from swarmnode.gossip.membership.table import Timing


@dataclass(frozen=True)
class MembershipConfig:
    """Gossip and failure-detector settings (seconds unless named otherwise).

    The defaults detect a crashed peer within `dead_after` = 2.5 s in a small swarm (every peer
    hears every other directly: fanout 3 >= n - 1 for n = 4) while leaving 5 gossip intervals of
    silence before a death, so a loaded peer whose loop runs late is not declared dead. In
    larger swarms both thresholds grow by `swarmnode.gossip.membership.failure.size_allowance(n)` (1 s at n = 16,
    2 s at n = 1024) because heartbeats arrive through more hops.
    `scripts/bench/membership/liveness.py --mode sim` measures both margins against n.
    """

    gossip_interval: float = 0.5
    fanout: int = 3
    suspect_after: float = 1.5
    dead_after: float = 2.5
    tombstone_ttl: float = 60.0
    # A member whose heartbeats come later than the thresholds assume has them stretched
    # (`swarmnode.gossip.membership.failure.stretched`), up to this much silence before it is
    # dead (0: 4 x dead_after): every crash is detected within it
    dead_after_max: float = 0.0
    request_timeout: float = 1.0  # deadline of one gossip exchange
    join_attempt_timeout: float = 2.0  # deadline of one join request to one seed
    join_backoff: float = 0.1  # wait after the first pass over the seeds; doubles each pass
    join_backoff_max: float = 2.0
    leave_timeout: float = 0.5  # deadline of each leave announcement (sent in parallel)
    max_digest: int = 2048  # entries per digest sent or accepted
    # Bounded state: the table holds at most `max_members` others (a flood cannot grow memory
    # or the status page past it), and each source brings at most `new_member_rate` newcomers
    # a second (burst `new_member_burst`); see `swarmnode.gossip.membership.admission`.
    max_members: int = 1024
    # ... and each host (advertised, or the source that introduced a member) keeps at most
    # `max_members_per_host` live members: rates bound how fast, this how many (an insider
    # holding the secret could otherwise list sybils without end); see
    # `swarmnode.gossip.membership.caps`
    max_members_per_host: int = DEFAULT_PER_HOST
    # ... and each /24 or /64 of them `max_members_per_prefix` (0: 4 x per host)
    max_members_per_prefix: int = 0
    new_member_rate: float = 32.0
    new_member_burst: int = 512

    def validate(self) -> MembershipConfig:
        problems = timing_problems(
            self.gossip_interval, self.suspect_after, self.dead_after, self.tombstone_ttl
        )
        cap = self.dead_after_max
        if not (
            isinstance(cap, (int, float))
            and (cap == 0 or (math.isfinite(cap) and cap >= self.dead_after))
        ):
            problems.append(
                f"`dead_after_max` must be 0 (4 x dead_after) or at least `dead_after` "
                f"({self.dead_after:g} s), got {self.dead_after_max!r}"
            )
        if not (isinstance(self.fanout, int) and self.fanout >= 1):
            problems.append(f"`fanout` must be an integer >= 1, got {self.fanout!r}")
        for name in ("request_timeout", "join_attempt_timeout", "leave_timeout"):
            if not getattr(self, name) > 0:
                problems.append(f"`{name}` must be > 0, got {getattr(self, name)!r}")
        if not 0 < self.join_backoff <= self.join_backoff_max:
            problems.append("join_backoff must be > 0 and <= join_backoff_max")
        if not (isinstance(self.max_digest, int) and self.max_digest >= 2):
            problems.append(f"max_digest must be an integer >= 2, got {self.max_digest!r}")
        if not (isinstance(self.max_members, int) and self.max_members >= 1):
            problems.append(f"`max_members` must be an integer >= 1, got {self.max_members!r}")
        if not (isinstance(self.max_members_per_host, int) and self.max_members_per_host >= 1):
            problems.append(
                f"`max_members_per_host` must be an integer >= 1, got {self.max_members_per_host!r}"
            )
        if not (isinstance(self.max_members_per_prefix, int) and self.max_members_per_prefix >= 0):
            problems.append(
                "`max_members_per_prefix` must be an integer >= 0 (0: 4 x per host), got "
                f"{self.max_members_per_prefix!r}"
            )
        if not (self.new_member_rate > 0 and self.new_member_burst >= 1):
            problems.append("`new_member_rate` must be > 0 and `new_member_burst` >= 1")
        if problems:
            raise MembershipError("; ".join(problems))
        return self

    @property
    def timing(self) -> Timing:
        return Timing(
            self.suspect_after,
            self.dead_after,
            self.tombstone_ttl,
            self.gossip_interval,
            self.fanout,
            self.dead_after_max,
        )

    def replace(self, **changes: Any) -> MembershipConfig:
        return dataclasses.replace(self, **changes).validate()

    @classmethod
    def for_interval(
        cls,
        gossip_interval: float,
        *,
        suspect_after: float | None = None,
        dead_after: float | None = None,
        **other: Any,
    ) -> MembershipConfig:
        """Defaults that keep their meaning at another interval: unless given, suspect after
        3 and dead after 5 silent intervals (never sooner than the 0.5 s-interval defaults)."""
        base = cls()
        if suspect_after is None:
            suspect_after = max(base.suspect_after, 3 * gossip_interval)
        if dead_after is None:
            dead_after = max(base.dead_after, 5 * gossip_interval, suspect_after + gossip_interval)
        ttl = other.pop("tombstone_ttl", max(base.tombstone_ttl, 4 * dead_after))
        return cls(
            gossip_interval=gossip_interval,
            suspect_after=suspect_after,
            dead_after=dead_after,
            tombstone_ttl=ttl,
            **other,
        ).validate()
