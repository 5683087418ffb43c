"""The membership table: one entry per known peer, merged from gossip digests.

No I/O and no clock of its own: every method that judges time takes `now` (local monotonic
seconds), so the merge rules are tested with a fake clock and the simulation bench drives
hundreds of tables directly. One class holds the table's state and
everything that changes it: the merge of received entries (below), our own entry, time (sweeps,
tombstones) and the views.

The table holds at most `max_members` others. A newcomer to a full table takes the place of the
oldest tombstone, else it is refused: members we know (longest-known first) keep their place.

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
word (`swarmnode.gossip.membership.records`), so only the owner moves its address, raises its incarnation
or heartbeat, or marks itself left; stale re-gossip is ignored before any check. `verify` gets
the proof we hold of the same member: a heartbeat under a record we already verified is checked
on its hash chain (a few SHA-256), only a new record costs an Ed25519 verification.
The first forged signature ends the merge of that digest (honest peers relay only records they
verified). Counters are bounded: an incarnation more than `MAX_INCARNATION_JUMP` or a heartbeat
more than `MAX_HEARTBEAT_JUMP` ahead of what we hold is refused and logged.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any

from swarmnode.gossip.errors import MembershipError
from swarmnode.gossip.membership.caps import host_of
from swarmnode.gossip.membership.entries import MAX_COUNTER, Gossiped, Proof, meta_problem
from swarmnode.gossip.membership.failure import (
    ALIVE,
    DEAD,
    LEFT,
    STATES,
    SUSPECT,
    TOMBSTONES,
    dead_cap,
    gap_update,
    healthy_gap,
    liveness,
    size_allowance,
    stretched,
    thresholds,
)
from swarmnode.gossip.membership.views import Change, Member, Timing

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
        "gap_dev",
        "gap_mean",
        "heartbeat",
        "incarnation",
        "last_advance",
        "meta",
        "peer_id",
        "proof",
        "reported",
        "tomb",
        "tomb_since",
        "worst",
    )

    def __init__(self, g: Gossiped, now: float) -> None:
        self.peer_id = g.peer_id
        self.reported: tuple[str, int] | None = None
        # its heartbeat gaps in our table (failure.gap_update), none measured yet; kept across
        # its lives (`take`): a slow member declared dead refutes with a new one, and starting
        # its measure afresh would have it die again at its next late beat
        self.gap_mean = self.gap_dev = self.worst = 0.0
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


DEFAULT_MAX_MEMBERS = 1024


class MemberTable:
    """This peer's view of the swarm. Single-threaded: call it from one event loop only.

    The suspect/dead thresholds in effect grow with the number of live members (see
    `swarmnode.gossip.membership.failure.size_allowance`); they are recomputed by every `sweep`.
    Each member's are stretched where its measured heartbeat gaps are longer than a healthy
    member's (`limits`, `swarmnode.gossip.membership.failure.stretched`).
    """

    def __init__(
        self,
        self_id: str,
        addr: str,
        incarnation: int,
        timing: Timing,
        *,
        max_members: int = DEFAULT_MAX_MEMBERS,
        seal: Callable[[Gossiped], Gossiped] | None = None,
    ) -> None:
        self.self_id = self_id
        self.max_members = max_members
        self._seal = seal  # signs our own entry (signed tables); None: unsigned
        self.refused = 0  # entries refused: table full, counter bounds (for status and tests)
        self.addr = addr
        self.incarnation = incarnation
        self.heartbeat = 0
        self.meta: Mapping[str, Any] = {}
        self.leaving = False
        self.refutations = 0
        self.timing = timing
        self._entries: dict[str, Entry] = {}
        # what we gossip about live entries, so a digest is mostly a plain copy; entries that
        # advanced since the last digest are rebuilt then (a member may advance several times
        # between two digests)
        self._wire: dict[str, Gossiped] = {}
        self._dirty: set[str] = set()
        self._rescale(1)

    def _rescale(self, n_live: int) -> None:
        t = self.timing
        self.suspect_after, self.dead_after = thresholds(
            t.suspect_after, t.dead_after, t.gossip_interval, n_live, t.fanout
        )
        allowance = size_allowance(n_live, t.fanout, t.gossip_interval)
        self.healthy_gap = healthy_gap(t.gossip_interval, allowance)
        self.dead_cap = dead_cap(t.dead_after, t.dead_after_max)

    def limits(self, e: Entry) -> tuple[float, float]:
        """The (suspect, dead) silences of `e`: the thresholds in effect, stretched where its
        heartbeats come later than a healthy member's (failure.stretched)."""
        if e.worst <= self.healthy_gap:  # the usual member: no arithmetic
            return self.suspect_after, self.dead_after
        return stretched(
            self.suspect_after, self.dead_after, e.worst, self.healthy_gap, self.dead_cap
        )

    def limits_of(self, peer_id: str) -> tuple[float, float] | None:
        """`limits` of a known member (None: unknown); for status and tests."""
        e = self._entries.get(peer_id)
        return None if e is None else self.limits(e)

    # --- self -------------------------------------------------------------------------

    def bump(self) -> None:
        self.heartbeat += 1

    def set_meta(self, meta: dict[str, Any]) -> None:
        problem = meta_problem(meta)
        if problem is not None:
            raise MembershipError(problem)
        self.meta = dict(meta)  # a fresh dict: digests already sent keep the old one

    def self_entry(self) -> Gossiped:
        state = LEFT if self.leaving else ALIVE
        g = Gossiped(
            self.self_id, self.addr, self.incarnation, self.heartbeat, state, 0.0, self.meta
        )
        # signed (`records.RecordSigner`): a new record only when something but the heartbeat
        # changed, else the next value of the record's heartbeat chain
        return g if self._seal is None else self._seal(g)

    # --- time -------------------------------------------------------------------------

    def sweep(self, now: float) -> list[Change]:
        """Turn silent entries into tombstones, forget expired ones, rescale the thresholds
        to the live count; report what changed since the last sweep."""
        ttl = self.timing.tombstone_ttl
        changes = []
        n_live = 1
        dead_floor, healthy = self.dead_after, self.healthy_gap
        for peer_id, e in list(self._entries.items()):
            if e.tomb is None:
                dead_after = dead_floor if e.worst <= healthy else self.limits(e)[1]
                if now - e.last_advance >= dead_after:
                    self._entomb(e, DEAD, e.last_advance + dead_after)
            if e.tomb is not None and now - e.tomb_since >= ttl:
                del self._entries[peer_id]
                continue
            n_live += e.tomb is None
            state = self.state_of(e, now)
            if e.reported != (state, e.incarnation):
                old = e.reported[0] if e.reported else None
                changes.append(Change(peer_id, e.addr, old, state, e.incarnation))
                e.reported = (state, e.incarnation)
        self._rescale(n_live)
        return changes

    def credit(self, seconds: float) -> None:
        """We could not hear anyone for `seconds` (our own loop stalled): extend every live
        entry's silence timer by that much rather than blame the others."""
        for e in self._entries.values():
            if e.tomb is None:
                e.last_advance += seconds

    # --- views ------------------------------------------------------------------------

    def state_of(self, e: Entry, now: float) -> str:
        if e.tomb is not None:
            return e.tomb
        if e.worst <= self.healthy_gap:  # the usual member: its thresholds are the table's
            return liveness(e.last_advance, now, self.suspect_after, self.dead_after)
        return liveness(e.last_advance, now, *self.limits(e))

    def members(self, now: float, states: tuple[str, ...] = STATES) -> list[Member]:
        """Every other known peer (tombstones included unless `states` excludes them)."""
        out = []
        ttl, healthy = self.timing.tombstone_ttl, self.healthy_gap
        for e in self._entries.values():
            if e.tomb is None:
                silent = now - e.last_advance
                suspect_after, dead_after = (
                    (self.suspect_after, self.dead_after) if e.worst <= healthy else self.limits(e)
                )
                state = (
                    ALIVE if silent < suspect_after else SUSPECT if silent < dead_after else DEAD
                )
            elif now - e.tomb_since < ttl:
                state = e.tomb
            else:
                continue  # expired, not yet swept
            if state in states:
                out.append(
                    Member(
                        e.peer_id,
                        e.addr,
                        state,
                        e.incarnation,
                        e.heartbeat,
                        now - e.last_advance,
                        e.meta,
                    )
                )
        return out

    def get(self, peer_id: str, now: float) -> Member | None:
        e = self._entries.get(peer_id)
        if e is None or (e.tomb is not None and now - e.tomb_since >= self.timing.tombstone_ttl):
            return None
        return Member(
            e.peer_id,
            e.addr,
            self.state_of(e, now),
            e.incarnation,
            e.heartbeat,
            now - e.last_advance,
            e.meta,
        )

    def public_key(self, peer_id: str) -> bytes | None:
        """The public key in `peer_id`'s signed record (None: unknown, or an unsigned table)."""
        e = self._entries.get(peer_id)
        return e.proof.public if e is not None and e.proof is not None else None

    def __len__(self) -> int:
        return len(self._entries)

    def digest(
        self, now: float, limit: int | None = None, rng: random.Random | None = None
    ) -> list[Gossiped]:
        """Our entry first, then every other known peer; a random subset past `limit`."""
        if self._dirty:
            for peer_id in self._dirty:
                self._wire[peer_id] = self._entries[peer_id].live_wire()
            self._dirty.clear()
        out = [self.self_entry(), *self._wire.values()]
        if len(self._wire) < len(self._entries):
            ttl = self.timing.tombstone_ttl
            for e in self._entries.values():
                if e.tomb is not None and now - e.tomb_since < ttl:
                    age = max(0.0, now - e.tomb_since)
                    out.append(
                        Gossiped(
                            e.peer_id,
                            e.addr,
                            e.incarnation,
                            e.heartbeat,
                            e.tomb,
                            age,
                            e.meta,
                            e.proof,
                        )
                    )
        if limit is not None and len(out) > limit:
            # our own entry always travels: it carries our heartbeat
            out = [out[0], *(rng or random).sample(out[1:], limit - 1)]
        return out

    # --- merging received entries -----------------------------------------------------------

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
        table, dirty, dead_floor, healthy = (
            self._entries,
            self._dirty,
            self.dead_after,
            self.healthy_gap,
        )
        interval = self.timing.gossip_interval
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
                        gap = now - e.last_advance
                        dead_after = dead_floor if e.worst <= healthy else self.limits(e)[1]
                        if gap >= dead_after:
                            # already dead by our own timer: a late beat cannot revive it
                            self._entomb(e, DEAD, e.last_advance + dead_after)
                        else:
                            # its gaps measured (a stall credited to us can put the last
                            # advance ahead: no negative gap)
                            e.gap_mean, e.gap_dev, e.worst = gap_update(
                                e.gap_mean, e.gap_dev, gap if gap > 0.0 else 0.0, interval
                            )
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
        return (
            (e.peer_id, e.addr)
            for e in self._entries.values()
            if e.tomb is None and now - e.last_advance < self.limits(e)[1]
        )

    def enlists(self, g: Gossiped) -> bool:
        """Whether merging `g` could make its member live at a host where it is not live now: a
        newcomer, a new life over a tombstone, or a move. Only those meet the per-host cap
        (`swarmnode.gossip.membership.caps`); a beat of a member in place never does."""
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
