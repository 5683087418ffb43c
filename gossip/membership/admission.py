"""Who may become a member: the admission mode, and how fast each source may bring newcomers.

Modes (`Admission.mode`):
- `open`: anyone who can reach a peer may join; each key is one member, so sybils are bounded
  only by the rates below and the table's `max_members`.
- `secret`: the swarm secret's HMAC (`swarmnode.gossip.auth.signer`, wired by the node) authenticates
  every message before it reaches membership: a peer without the secret never gets in. Inside,
  it is `open`: a holder of the secret can still bring sybils, at the rates below.
- `trust`: an allow-list of public keys; records of any other key are never listed, whoever
  relays them.

Rates: every source (the remote address when the transport supplies it, else the sender's
declared id) has a token bucket of new members per second (`new_member_rate`, burst
`new_member_burst`), every source's prefix (its /24 or /64, gossip/membership/caps.py) one of
`PREFIX_FACTOR` times that (addresses within a block are cheap), and all sources
together share one more (`global_member_rate`): rotating addresses or keys does not multiply
the budget. A newcomer without a token is dropped before its signature is checked, so a flood
costs a dictionary lookup per entry.

What each mode promises, and what it does not: docs/security.md ("What each mode promises");
the figures: docs/benchmarks.md ("Hostile members and fuzzing", "Hostile insiders").
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Iterable

from swarmnode.gossip.auth import peer_id_of
from swarmnode.gossip.errors import MembershipError
from swarmnode.gossip.membership.caps import PREFIX_FACTOR, prefix_of

MODES = ("open", "secret", "trust")
DECLARED = "id:"  # a source named by the sender's declared id: no address (in-memory network)
MAX_SOURCES = 4096  # buckets kept; the least recently used source is forgotten first


def address_of(source: str) -> str | None:
    """The remote address a source names, or None for a declared id (which the sender chose)."""
    return None if source.startswith(DECLARED) else source


class TokenBucket:
    """`rate` tokens a second up to `burst`; time is whatever the caller passes as `now`."""

    __slots__ = ("burst", "rate", "stamp", "tokens")

    def __init__(self, rate: float, burst: float, now: float) -> None:
        self.rate, self.burst, self.tokens, self.stamp = rate, burst, float(burst), now

    def take(self, now: float, n: float = 1.0) -> bool:
        if self.has(now, n):
            self.tokens -= n
            return True
        return False

    def has(self, now: float, n: float = 1.0) -> bool:
        """Whether `take(now, n)` would succeed; refills, spends nothing (a check to pass
        before another bucket is spent, so that a refusal there costs this one nothing)."""
        self.tokens = min(self.burst, self.tokens + max(0.0, now - self.stamp) * self.rate)
        self.stamp = now
        return self.tokens >= n


class Admission:
    """The admission rules of one peer. Single-threaded, like the member table."""

    def __init__(
        self,
        mode: str = "open",
        trusted_keys: Iterable[bytes] = (),
        *,
        new_member_rate: float = 32.0,
        new_member_burst: int = 512,
        global_member_rate: float = 128.0,
        global_member_burst: int = 1024,
        clock: Callable[[], float] | None = None,
    ) -> None:
        if mode not in MODES:
            raise MembershipError(f"`admission` must be one of {', '.join(MODES)}, got {mode!r}")
        self.mode = mode
        self.trusted = frozenset(peer_id_of(k) for k in trusted_keys)
        if mode == "trust" and not self.trusted:
            raise MembershipError("`admission` trust needs at least one key in `trusted_keys`")
        self.rate, self.burst = new_member_rate, new_member_burst
        self._global = TokenBucket(global_member_rate, global_member_burst, 0.0)
        self._sources: OrderedDict[str, TokenBucket] = OrderedDict()
        self.refused_untrusted = 0
        self.refused_rate = 0

    def listable(self, peer_id: str) -> bool:
        """Whether a member with this id may ever be in our table."""
        if self.mode == "trust" and peer_id not in self.trusted:
            self.refused_untrusted += 1
            return False
        return True

    def take_newcomer(self, source: str, now: float) -> bool:
        """Spend one token of `source`'s bucket and of the global one for a new member."""
        bucket = self._bucket(source, now, 1)
        addr = address_of(source)
        block = self._bucket("net " + prefix_of(addr), now, PREFIX_FACTOR) if addr else None
        # the source's own bucket first: a flooder empties its bucket, not everyone's; and
        # each is looked at before any is spent, so that a refusal by the prefix's or the
        # global bucket costs the source none of its own tokens
        buckets = (bucket, self._global) if block is None else (bucket, block, self._global)
        if all(b.has(now) for b in buckets):
            for b in buckets:
                b.take(now)
            return True
        self.refused_rate += 1
        return False

    def _bucket(self, key: str, now: float, factor: int) -> TokenBucket:
        bucket = self._sources.get(key)
        if bucket is None:
            bucket = self._sources[key] = TokenBucket(factor * self.rate, factor * self.burst, now)
            if len(self._sources) > MAX_SOURCES:
                self._sources.popitem(last=False)
        else:
            self._sources.move_to_end(key)
        return bucket
