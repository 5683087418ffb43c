"""The per-host cap: how many live members one address may hold in our table.

Admission rates bound how fast a source brings identities; this bounds how many it keeps. A key
costs nothing to make, so an insider (a holder of the swarm secret) could otherwise list a
member per token, sybils that never answer an exchange, on which the honest peers would waste
their rounds (docs/security.md, "How many identities one machine may bring"). A member is
counted under two keys, and neither may exceed `per_host`:

- its advertised host (the host of its signed record's address), whatever path brought it:
  a join, a digest it sent itself, or one relayed by an honest peer;
- the source that introduced it to us when it was not solicited (the TCP source address of the
  join or digest that first listed it; `Admission`'s source): a sybil may advertise any host, but
  it arrives from where its maker sits.

Only live entries count (tombstones are never sampled, and expire), and a member already live at
a host keeps its place: a newcomer to a full host is refused, never someone we already know.
The trade-off: honest peers that share an address with an attacker (one machine, one NAT) share
its quota, so the cap must exceed the peers an operator runs behind one address; the default 32
leaves room for the ~10 loopback peers of the demo, tests and chaos runs.

Per prefix too: addresses are cheap within a block, so every count above is also
kept per /24 (IPv4) and /64 (IPv6) of the host and of the source, capped at `per_prefix`
(`max_members_per_prefix`, default 4 x `per_host` = 128): an attacker holding a /24 lists at
most 128 sybils through it, not 32 per address. The same trade-off as per host, a
block wider: honest peers in one /24 (a cluster on one subnet) share its quota, so a larger
cluster raises the cap. Across many prefixes the cap does not bind: what bounds that is the
table's size and the partner choice of the exchange and the gossip (gossip/link/partners.py).
A relayed sybil counts under its relayer's address at the receiver, so a peer may list
`per_host` sybils per honest relayer on top of the attacker's own quota: what bounds that
residue is the table's `max_members` and the partners' back-off (gossip/link/backoff.py).
"""

from __future__ import annotations

import functools
import ipaddress
from collections import Counter
from collections.abc import Callable, Iterable

DEFAULT_PER_HOST = 32
# The counts are rebuilt at most this often: one O(table) pass per message would let a flood of
# small digests and joins from many sources take an honest peer's event loop.
# Members that fall silent meanwhile are still counted until the next rebuild: conservative.
REUSE_S = 1.0
PREFIX_FACTOR = 4  # the per-prefix cap and rate, in per-host ones (`max_members_per_prefix`)


def host_of(addr: str) -> str:
    """The host part of "host:port" ("[::1]:7070" -> "::1"), lowercased."""
    host, sep, _ = addr.rpartition(":")
    return (host if sep else addr).strip("[]").lower()


@functools.lru_cache(maxsize=8192)
def prefix_of(host: str) -> str:
    """The block an address is cheap within: its /24 (IPv4) or /64 (IPv6); a name is its own.
    Cached, and a dotted quad takes a string fast path: the counts are rebuilt per digest."""
    head, dot, last = host.rpartition(".")
    if dot and last.isdigit() and head.count(".") == 2 and head.replace(".", "").isdigit():
        return f"{head}.0/24"
    try:
        ip = ipaddress.ip_address(host)
    except ValueError:
        return host
    if ip.version == 6 and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    bits = 24 if ip.version == 4 else 64
    return str(ipaddress.ip_network(f"{ip}/{bits}", strict=False))


class HostCap:
    """Counts live members per advertised host and per introducing source; single-threaded."""

    def __init__(
        self, per_host: int = DEFAULT_PER_HOST, remember: int = 4096, per_prefix: int | None = None
    ) -> None:
        self.per_host = per_host
        self.per_prefix = PREFIX_FACTOR * per_host if per_prefix is None else per_prefix
        self._remember = remember
        self._introducer: dict[str, str] = {}  # peer id -> the source that first listed it
        self._built: tuple[float, Counter[str]] | None = None  # (when, counts), kept by `add`
        self.refused = 0

    def counts(self, live: Iterable[tuple[str, str]], now: float | None = None) -> Counter[str]:
        """The counts of the live (peer id, addr) pairs given, then kept current by `add`;
        with `now`, the same counts for `REUSE_S` (`live` is not read then)."""
        if now is not None and self._built is not None and 0 <= now - self._built[0] < REUSE_S:
            return self._built[1]
        counts: Counter[str] = Counter()
        for peer_id, addr in live:
            for key in _keys(addr, self._introducer.get(peer_id)):
                counts[key] += 1
        self._built = None if now is None else (now, counts)
        return counts

    def fits(self, counts: Counter[str], addr: str, source: str | None) -> bool:
        """Room for one more member at `addr`, introduced by `source` (None: solicited)?"""
        if all(
            counts[key] < (self.per_host if key.startswith(("host ", "via ")) else self.per_prefix)
            for key in _keys(addr, source)
        ):
            return True
        self.refused += 1
        return False

    def add(self, counts: Counter[str], peer_id: str, addr: str, source: str | None) -> None:
        """Count a member let in (by `fits`), and remember who introduced it."""
        for key in _keys(addr, source):
            counts[key] += 1
        if source is not None:
            self._introducer.setdefault(peer_id, source)

    def forget(self, known: Callable[[str], bool]) -> None:
        """Drop the introductions of members no longer in the table, once there are more than
        `remember` (refused by the merge, or expired); the oldest go too if that is not enough."""
        if len(self._introducer) < self._remember:
            return
        self._introducer = {p: s for p, s in self._introducer.items() if known(p)}
        while len(self._introducer) >= self._remember:
            del self._introducer[next(iter(self._introducer))]


def _keys(addr: str, source: str | None) -> tuple[str, ...]:
    """What one member at `addr` introduced by `source` counts under: its host and the host's
    prefix, and the source and its prefix."""
    host = host_of(addr)
    if source is None:
        return ("host " + host, "net " + prefix_of(host))
    src = host_of(source) if ":" in source and source.count(":") == 1 else source
    return ("host " + host, "net " + prefix_of(host), "via " + source, "vianet " + prefix_of(src))
