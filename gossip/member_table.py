"""The membership table: one entry per known peer, merged from gossip digests.

No I/O and no clock of its own: every method that judges time takes `now` (local monotonic
seconds), so the merge rules are tested with a fake clock and the simulation bench drives
hundreds of tables directly. The merge rules (and the signed-table checks) are in
`swarmnode.gossip.member_merge`; this module keeps our own entry, time (sweeps, tombstones)
and the views.

The table holds at most `max_members` others. A newcomer to a full table takes the place of the
oldest tombstone, else it is refused: members we know (longest-known first) keep their place.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Callable, Mapping
from typing import Any

from swarmnode.gossip.entries import Gossiped, MembershipError, meta_problem
from swarmnode.gossip.failure import (
    ALIVE,
    DEAD,
    LEFT,
    STATES,
    SUSPECT,
    liveness,
    thresholds,
)
from swarmnode.gossip.member_merge import Entry, MergeRules
from swarmnode.gossip.member_views import Change, Member, Timing

log = logging.getLogger(__name__)

DEFAULT_MAX_MEMBERS = 1024


class MemberTable(MergeRules):
    """This peer's view of the swarm. Single-threaded: call it from one event loop only.

    The suspect/dead thresholds in effect grow with the number of live members (see
    `swarmnode.gossip.failure.size_allowance`); they are recomputed by every `sweep`.
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
        for peer_id, e in list(self._entries.items()):
            if e.tomb is None and now - e.last_advance >= self.dead_after:
                self._entomb(e, DEAD, e.last_advance + self.dead_after)
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
        return liveness(e.last_advance, now, self.suspect_after, self.dead_after)

    def members(self, now: float, states: tuple[str, ...] = STATES) -> list[Member]:
        """Every other known peer (tombstones included unless `states` excludes them)."""
        out = []
        ttl, suspect_after, dead_after = (
            self.timing.tombstone_ttl,
            self.suspect_after,
            self.dead_after,
        )
        for e in self._entries.values():
            if e.tomb is None:
                silent = now - e.last_advance
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
