"""The merge rules of the member table: how a received digest entry meets ours.

Merge rules, for a received entry against ours (same peer id):
- a higher incarnation wins outright (a restarted peer, even over a tombstone);
- a lower incarnation is stale and ignored;
- same incarnation: `left` is final (the peer said so itself); a higher heartbeat advances a
  live entry and restarts its silence timer; nothing revives a tombstone of that incarnation,
  so stale gossip cannot resurrect a dead peer;
- a remote `dead` never kills an entry we still hear from: each peer judges death by its own
  silence timer, so one starved peer's false alarm does not spread. Tombstones are learnt only
  for peers we do not know, or at a newer incarnation than ours.
Entries about ourselves never change our state: a report that we are suspect/dead/left (or a
newer incarnation of us) is refuted by taking `max(seen) + 1` as our incarnation.

Signed tables (`merge(..., verify=)`): an entry changes the table only once it is its owner's
word (`swarmnode.gossip.records`), so only the owner moves its address, raises its incarnation
or heartbeat, or marks itself left; stale re-gossip is ignored before any check. `verify` gets
the proof we hold of the same member: a heartbeat under a record we already verified is checked
on its hash chain (a few SHA-256), only a new record costs an Ed25519 verification.
The first forged signature ends the merge of that digest (honest peers relay only records they
verified). Counters are bounded: an incarnation more than `MAX_INCARNATION_JUMP` or a heartbeat
more than `MAX_HEARTBEAT_JUMP` ahead of what we hold is refused and logged.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Iterator

from swarmnode.gossip.entries import MAX_COUNTER, Gossiped, Proof
from swarmnode.gossip.failure import ALIVE, DEAD, LEFT, SUSPECT, TOMBSTONES
from swarmnode.gossip.member_cap import host_of
from swarmnode.gossip.member_views import Timing

log = logging.getLogger(__name__)

# Incarnations start at the wall clock in ms and grow by 1 per refutation; heartbeats by 2 a
# second. A peer back after 30 years, or a heartbeat 2^32 beats ahead, is not a peer we know.
MAX_INCARNATION_JUMP = 30 * 365 * 86400 * 1000
MAX_HEARTBEAT_JUMP = 2**32
# (entry, the proof we hold of that member or None, the heartbeat it proves) -> authentic?
Verify = Callable[[Gossiped, Proof | None, int], bool]


class Entry:
    """Our record of another peer. `tomb` is None for live entries, else DEAD or LEFT."""

    __slots__ = (
        "addr",
        "heartbeat",
        "incarnation",
        "last_advance",
        "meta",
        "peer_id",
        "proof",
        "reported",
        "tomb",
        "tomb_since",
    )

    def __init__(self, g: Gossiped, now: float) -> None:
        self.peer_id = g.peer_id
        self.reported: tuple[str, int] | None = None
        self.take(g, now)

    def take(self, g: Gossiped, now: float) -> None:
        """Adopt `g` wholesale (a new peer, or a newer incarnation of this one)."""
        self.addr, self.incarnation, self.heartbeat, self.meta, self.proof = (
            g.addr,
            g.incarnation,
            g.heartbeat,
            g.meta,
            g.proof,
        )
        if g.state in TOMBSTONES:
            self.tomb: str | None = g.state
            self.tomb_since = now - g.age
            self.last_advance = self.tomb_since
        else:
            self.tomb = None
            self.tomb_since = 0.0
            self.last_advance = now

    def live_wire(self) -> Gossiped:
        return Gossiped(
            self.peer_id,
            self.addr,
            self.incarnation,
            self.heartbeat,
            ALIVE,
            0.0,
            self.meta,
            self.proof,
        )


class MergeRules:
    """`MemberTable`'s merge half (a mixin: the table holds the state named below)."""

    self_id: str
    incarnation: int
    leaving: bool
    refutations: int
    refused: int
    max_members: int
    dead_after: float
    timing: Timing
    _entries: dict[str, Entry]
    _wire: dict[str, Gossiped]
    _dirty: set[str]

    def _about_me(self, g: Gossiped, verify: Verify | None) -> bool:
        """Refute a doubt about us; False when `g` is forged (signed tables)."""
        if self.leaving:
            return True  # we are going: nothing to refute
        newer = g.incarnation > self.incarnation
        doubted = g.incarnation == self.incarnation and g.state in (SUSPECT, DEAD, LEFT)
        if newer or doubted:
            # only a record we signed ourselves (an earlier life) makes us refute
            if verify is not None and not verify(g, None, 0):
                return False
            if g.incarnation >= MAX_COUNTER:
                self._refuse(g, "incarnation at the bound: not refuted")
                return True
            self.incarnation = g.incarnation + 1
            self.refutations += 1
            log.info(
                "%s: refuting %s at incarnation %d: now incarnation %d",
                self.self_id,
                g.state,
                g.incarnation,
                self.incarnation,
            )
        return True

    def merge(self, entries: Iterable[Gossiped], now: float, verify: Verify | None = None) -> int:
        """Fold received entries into the table (see the module doc for the rules).

        With `verify`, an entry that would change the table must pass it; the first that fails
        ends the merge. Returns the number of forged entries met (0 or 1)."""
        table, dirty, dead_after = self._entries, self._dirty, self.dead_after
        for g in entries:
            peer_id, _, incarnation, heartbeat, state, age, _, _ = g
            e = table.get(peer_id)
            if e is not None and incarnation == e.incarnation:
                # the common case, kept first and flat: same life of a known peer
                if e.tomb is None:
                    if state == LEFT or heartbeat > e.heartbeat:
                        if verify is not None and not verify(g, e.proof, e.heartbeat):
                            return 1
                        if heartbeat - e.heartbeat > MAX_HEARTBEAT_JUMP:
                            self._refuse(g, "heartbeat jump")
                            continue
                    if state == LEFT:
                        self._take_leave(e, g)
                        self._entomb(e, LEFT, now - age)
                    elif heartbeat > e.heartbeat:
                        if now - e.last_advance >= dead_after:
                            # already dead by our own timer: a late beat cannot revive it
                            self._entomb(e, DEAD, e.last_advance + dead_after)
                        else:
                            e.heartbeat, e.last_advance, e.addr, e.meta, e.proof = (
                                heartbeat,
                                now,
                                g.addr,
                                g.meta,
                                g.proof,
                            )
                            dirty.add(peer_id)
                elif e.tomb == DEAD and state == LEFT:
                    if verify is not None and not verify(g, None, 0):
                        return 1
                    self._take_leave(e, g)
                    e.tomb = LEFT  # it did say goodbye: keep the earlier start
            elif peer_id == self.self_id:
                if not self._about_me(g, verify):
                    return 1
            elif e is None:
                if state not in TOMBSTONES or age < self.timing.tombstone_ttl:
                    if verify is not None and not verify(g, None, 0):
                        return 1
                    if len(table) >= self.max_members and not self._evict_tombstone():
                        self._refuse(g, "table full")
                        continue
                    e = table[peer_id] = Entry(g, now)
                    self._rewire(e)
            elif incarnation > e.incarnation:
                if verify is not None and not verify(g, None, 0):
                    return 1
                if incarnation - e.incarnation > MAX_INCARNATION_JUMP:
                    self._refuse(g, "incarnation jump")
                    continue
                e.take(g, now)  # a newer life, even over a tombstone
                self._rewire(e)
            # else: an older incarnation: stale, ignored
        return 0

    def knows(self, peer_id: str) -> bool:
        return peer_id in self._entries or peer_id == self.self_id

    def live_addrs(self, now: float) -> Iterator[tuple[str, str]]:
        """(peer id, addr) of every live entry (neither a tombstone nor silent past `dead_after`
        by now): what the per-host cap counts."""
        since = now - self.dead_after
        return (
            (e.peer_id, e.addr)
            for e in self._entries.values()
            if e.tomb is None and e.last_advance > since
        )

    def enlists(self, g: Gossiped) -> bool:
        """Whether merging `g` could make its member live at a host where it is not live now: a
        newcomer, a new life over a tombstone, or a move. Only those meet the per-host cap
        (`swarmnode.gossip.member_cap`); a beat of a member in place never does."""
        if g.state not in (ALIVE, SUSPECT) or g.peer_id == self.self_id:
            return False
        e = self._entries.get(g.peer_id)
        if e is None:
            return True
        if e.tomb is not None:
            return g.incarnation > e.incarnation
        return g.addr != e.addr and host_of(g.addr) != host_of(e.addr)

    def _refuse(self, g: Gossiped, why: str) -> None:
        self.refused += 1
        # one line per 100 refusals: a flood must not turn into a flood of log lines
        if self.refused % 100 == 1:
            log.warning(
                "%s: refused member %s at incarnation %d, heartbeat %d: %s (%d refused so far)",
                self.self_id,
                g.peer_id[:32],
                g.incarnation,
                g.heartbeat,
                why,
                self.refused,
            )

    def _evict_tombstone(self) -> bool:
        """Make room in a full table by forgetting the oldest tombstone; False if none."""
        tombs = [e for e in self._entries.values() if e.tomb is not None]
        if not tombs:
            return False
        oldest = min(tombs, key=lambda e: e.tomb_since)
        del self._entries[oldest.peer_id]
        return True

    @staticmethod
    def _take_leave(e: Entry, g: Gossiped) -> None:
        """Keep the leave itself: the tombstone is relayed with what it holds, and a `left`
        hint on the alive record it held before is malformed to every receiver (every peer
        logged it several times a second after one clean leave)."""
        e.addr, e.heartbeat, e.meta, e.proof = g.addr, g.heartbeat, g.meta, g.proof

    def _entomb(self, e: Entry, state: str, since: float) -> None:
        e.tomb, e.tomb_since = state, since
        self._wire.pop(e.peer_id, None)
        self._dirty.discard(e.peer_id)

    def _rewire(self, e: Entry) -> None:
        if e.tomb is None:
            self._wire[e.peer_id] = e.live_wire()
        else:
            self._wire.pop(e.peer_id, None)
        self._dirty.discard(e.peer_id)
