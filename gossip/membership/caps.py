"""The per-host cap: how many live members one address may hold in our table (issue 10).

Admission rates bound how fast a source brings identities; this bounds how many it keeps. A key
costs nothing to make, so an insider (a holder of the swarm secret) could otherwise list a
member per token: 1,000 sybils that never answer an exchange, on which the honest peers would
waste their rounds. A member is counted under two keys, and neither may exceed `per_host`:

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
A relayed sybil counts under its relayer's address at the receiver, so a peer may list
`per_host` sybils per honest relayer on top of the attacker's own quota: what bounds that
residue is the table's `max_members` and the partners' back-off (gossip/link/backoff.py).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable

DEFAULT_PER_HOST = 32


def host_of(addr: str) -> str:
    """The host part of "host:port" ("[::1]:7070" -> "::1"), lowercased."""
    host, sep, _ = addr.rpartition(":")
    return (host if sep else addr).strip("[]").lower()


class HostCap:
    """Counts live members per advertised host and per introducing source; single-threaded."""

    def __init__(self, per_host: int = DEFAULT_PER_HOST, remember: int = 4096) -> None:
        self.per_host = per_host
        self._remember = remember
        self._introducer: dict[str, str] = {}  # peer id -> the source that first listed it
        self.refused = 0

    def counts(self, live: Iterable[tuple[str, str]]) -> Counter[str]:
        """The counts of the live (peer id, addr) pairs given: built once per message, then
        kept current by `add` while that message is admitted."""
        counts: Counter[str] = Counter()
        for peer_id, addr in live:
            counts["host " + host_of(addr)] += 1
            source = self._introducer.get(peer_id)
            if source is not None:
                counts["via " + source] += 1
        return counts

    def fits(self, counts: Counter[str], addr: str, source: str | None) -> bool:
        """Room for one more member at `addr`, introduced by `source` (None: solicited)?"""
        if counts["host " + host_of(addr)] < self.per_host and (
            source is None or counts["via " + source] < self.per_host
        ):
            return True
        self.refused += 1
        return False

    def add(self, counts: Counter[str], peer_id: str, addr: str, source: str | None) -> None:
        """Count a member let in (by `fits`), and remember who introduced it."""
        counts["host " + host_of(addr)] += 1
        if source is not None:
            counts["via " + source] += 1
            self._introducer.setdefault(peer_id, source)

    def forget(self, known: Callable[[str], bool]) -> None:
        """Drop the introductions of members no longer in the table, once there are more than
        `remember` (refused by the merge, or expired); the oldest go too if that is not enough."""
        if len(self._introducer) < self._remember:
            return
        self._introducer = {p: s for p, s in self._introducer.items() if known(p)}
        while len(self._introducer) >= self._remember:
            del self._introducer[next(iter(self._introducer))]
