"""What a received digest goes through before and while it meets the member table.

In order, cheapest first, so that a flood costs as little as possible:
1. the size cap (`max_digest` entries; longer digests are refused whole);
2. each entry's form and bounds (`parse_entry`, or when signed a `records.RecordOpener`, which
   remembers the records it opened by their bytes: they are re-gossiped unchanged);
3. for members the table does not know: the admission mode (`trust`: listed keys only); for any
   entry that would list a member live at a new host, the per-host cap
   (`swarmnode.gossip.membership.caps`); then for newcomers the source's and the global newcomer
   rate; a refused newcomer is never verified;
4. for newcomers we did not ask for, the verification budget (`STRANGER_VERIFY_RATE` units a
   second, burst `STRANGER_VERIFY_BURST`): a newcomer whose signature is not already known
   checked costs an Ed25519 verification (~0.1 ms: one unit) and the walk of its heartbeat
   chain from the record's base (up to 1024 SHA-256 steps, ~0.4 ms: one unit per
   `CHAIN_STEPS_PER_UNIT`). A flood of fresh members' digests, within the newcomer rates above
   (a burst of 1024), cost a peer 57 % of its rounds while it arrived (issue 34, item 19): the
   budget bounds the loop's time on strangers to ~2 % of a core, 10 ms at once. Past
   the budget a newcomer is left for a later digest (gossip repeats itself: it comes again),
   counted in `deferred`. The budget is looked at before the newcomer rate is spent, and
   either is spent only for an entry taken: a deferred stranger costs its source no newcomer
   token. Members we know are never budgeted, and go first: the merge ends at the first
   forged entry, which must not cost the known members' news. A join answer (which we asked
   for) is not budgeted either: it is our own table arriving;
5. the table merge, which checks a signature only for an entry that would change the table.

The join route takes the same path for its one entry (`open`, `sort`, `merge`): a digest drops
what is refused, the join answers with why (`UNTRUSTED`, `CAPPED`, `TOO_FAST`, or forged), and
a joiner past the verification budget is told to retry (429), as a digest's would be deferred.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from swarmnode.gossip.membership.admission import Admission, TokenBucket, address_of
from swarmnode.gossip.membership.caps import HostCap
from swarmnode.gossip.membership.entries import Gossiped, parse_entries, parse_entry
from swarmnode.gossip.membership.records import RecordOpener, Verifier
from swarmnode.gossip.membership.table import MemberTable

log = logging.getLogger(__name__)

# Why `sort` keeps an entry out of the table, in the order the checks run.
UNTRUSTED = "untrusted"  # a newcomer whose key the admission mode does not list
CAPPED = "capped"  # it would list a member live past the per-host (or per-prefix) cap
TOO_FAST = "too fast"  # a newcomer past the source's or the global newcomer rate
DEFERRED = "deferred"  # past the verification budget: left for a later digest, not refused

STRANGER_VERIFY_RATE = 200.0  # units a second (a unit ~0.1 ms of the loop): ~2 % of a core
STRANGER_VERIFY_BURST = 100.0  # ~10 ms of checks in one digest at most
CHAIN_STEPS_PER_UNIT = 256  # heartbeat chain steps that cost about one signature check


def verify_cost(g: Gossiped) -> float:
    """What checking a newcomer's entry costs, in units (see the module doc)."""
    assert g.proof is not None
    return 1.0 + max(0, g.heartbeat - g.proof.base) / CHAIN_STEPS_PER_UNIT


class Intake:
    """Parses, admits and merges digests into one table (signed when `verifier` is given)."""

    def __init__(
        self,
        table: MemberTable,
        admission: Admission,
        verifier: Verifier | None,
        max_digest: int,
        cap: HostCap | None = None,
        verify_budget: TokenBucket | None = None,
    ) -> None:
        self.table, self.admission, self.verifier = table, admission, verifier
        self.max_digest = max_digest
        self.forged_digests = 0
        self.opener = RecordOpener() if verifier is not None else None
        self.cap = cap or HostCap()
        self._capped_logged = 0
        self._open = parse_entry if self.opener is None else self.opener
        # its clock is the callers' `now` (the first call sets its stamp)
        self.verify_budget = verify_budget or TokenBucket(
            STRANGER_VERIFY_RATE, STRANGER_VERIFY_BURST, now=-1.0
        )
        self.deferred = 0  # newcomers left for a later digest: past the verification budget

    def open(self, raw: object) -> Gossiped:
        """One entry (a join's or a leave's), parsed as a digest's are; `CodecError` if it is
        malformed (a lone entry is refused whole, not dropped)."""
        return self._open(raw)

    def parse(self, raw: object, what: str) -> list[Gossiped]:
        """The well-formed entries of a digest; malformed ones are dropped with one log line."""
        good, dropped = parse_entries(raw, self.max_digest, self._open)
        if dropped:
            log.warning(
                "%s: dropped %d malformed entries of a %s (first: %s)",
                self.table.self_id,
                len(dropped),
                what,
                dropped[0],
            )
        return good

    def admit(
        self, entries: Sequence[Gossiped], source: str, now: float, solicited: bool = False
    ) -> list[Gossiped]:
        """The entries allowed to reach the table (`sort`'s first half)."""
        return self.sort(entries, source, now, solicited)[0]

    def sort(
        self, entries: Sequence[Gossiped], source: str, now: float, solicited: bool = False
    ) -> tuple[list[Gossiped], list[tuple[Gossiped, str]]]:
        """(admitted, refused with why): known members, and newcomers that pass the admission
        mode and (unless we asked for them: a join answer) the rate limits, are admitted; any
        entry that would list a member live at a new host must also fit the per-host cap."""
        table, admission, cap = self.table, self.admission, self.cap
        # introducers are counted by address; a declared id (no address known) is not one
        via = None if solicited else address_of(source)
        out: list[Gossiped] = []
        strangers: list[Gossiped] = []  # newcomers: after the known members (the module doc)
        refused: list[tuple[Gossiped, str]] = []
        counts = None  # built on the first entry that needs them: most digests have none
        for g in entries:
            known = table.knows(g.peer_id)
            if not known and not admission.listable(g.peer_id):
                refused.append((g, UNTRUSTED))
                continue
            capped = table.enlists(g)
            if capped:
                if counts is None:
                    counts = cap.counts(table.live_addrs(now), now)
                # the cap before the rate: a capped flood spends no newcomer tokens
                if not cap.fits(counts, g.addr, via):
                    refused.append((g, CAPPED))
                    continue
            if not (known or solicited):
                why = self._stranger(g, source, now)
                if why == DEFERRED:  # left for a later digest, not refused
                    continue
                if why:
                    refused.append((g, why))
                    continue
            if capped:
                cap.add(counts, g.peer_id, g.addr, via)
            (out if known else strangers).append(g)
        if counts is not None:
            self._log_capped(source)
            cap.forget(table.knows)
        return out + strangers, refused

    def _stranger(self, g: Gossiped, source: str, now: float) -> str:
        """Why an unsolicited newcomer is not taken now ("" if it is): the verification
        budget is looked at first and the newcomer rate spent only for an entry taken, so a
        stranger deferred for the budget costs its source none of its newcomer tokens (and
        one refused as too fast none of the budget)."""
        cost = self._verify_cost(g)
        budget = self.verify_budget
        if budget.stamp < 0:  # its clock is the callers' `now`: the first call sets it
            budget.stamp = now
        if cost and not budget.has(now, cost):
            self.deferred += 1
            return DEFERRED
        if not self.admission.take_newcomer(source, now):
            return TOO_FAST
        if cost:
            budget.take(now, cost)
        return ""

    def _verify_cost(self, g: Gossiped) -> float:
        """What checking a newcomer's signature costs here: nothing if already checked."""
        if self.verifier is None or g.proof is None or self.verifier.known(g):
            return 0.0
        return verify_cost(g)

    def _log_capped(self, source: str) -> None:
        # one line per 100 refusals, as for a full table: a flood must not flood the log
        refused = self.cap.refused
        first = self._capped_logged == 0
        if refused > self._capped_logged and (first or refused // 100 > self._capped_logged // 100):
            log.warning(
                "%s: refused members past the per-host cap of %d (`max_members_per_host`); "
                "latest source %s; %d refused so far",
                self.table.self_id,
                self.cap.per_host,
                source,
                refused,
            )
            self._capped_logged = refused

    def merge(self, entries: Sequence[Gossiped], now: float, what: str) -> bool:
        """Merge into the table; True when a forged signature was found (the rest ignored)."""
        check = self.verifier.check if self.verifier is not None else None
        forged = bool(self.table.merge(entries, now, check))
        if forged:
            self.forged_digests += 1
            log.warning(
                "%s: forged signature in a %s: the rest of it is ignored (%d such digests)",
                self.table.self_id,
                what,
                self.forged_digests,
            )
        return forged
