"""What a received digest goes through before and while it meets the member table.

In order, cheapest first, so that a flood costs as little as possible:
1. the size cap (`max_digest` entries; longer digests are refused whole);
2. each entry's form and bounds (`parse_entry`, or when signed a `records.RecordOpener`, which
   remembers the records it opened by their bytes: they are re-gossiped unchanged);
3. for members the table does not know: the admission mode (`trust`: listed keys only), then
   the source's and the global newcomer rate; a refused newcomer is never verified;
4. the table merge, which checks a signature only for an entry that would change the table.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from swarmnode.gossip.admission import Admission
from swarmnode.gossip.entries import Gossiped, parse_entries, parse_entry
from swarmnode.gossip.member_table import MemberTable
from swarmnode.gossip.records import RecordOpener, Verifier

log = logging.getLogger(__name__)


class Intake:
    """Parses, admits and merges digests into one table (signed when `verifier` is given)."""

    def __init__(
        self,
        table: MemberTable,
        admission: Admission,
        verifier: Verifier | None,
        max_digest: int,
    ) -> None:
        self.table, self.admission, self.verifier = table, admission, verifier
        self.max_digest = max_digest
        self.forged_digests = 0
        self.opener = RecordOpener() if verifier is not None else None
        self._open = parse_entry if self.opener is None else self.opener

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
        """The entries allowed to reach the table: known members, and newcomers that pass the
        admission mode and (unless we asked for them: a join answer) the rate limits."""
        table, admission = self.table, self.admission
        out = []
        for g in entries:
            if table.knows(g.peer_id):
                out.append(g)
            elif admission.listable(g.peer_id) and (
                solicited or admission.take_newcomer(source, now)
            ):
                out.append(g)
        return out

    def merge(self, entries: Sequence[Gossiped], now: float, what: str) -> None:
        check = self.verifier.check if self.verifier is not None else None
        if self.table.merge(entries, now, check):
            self.forged_digests += 1
            log.warning(
                "%s: forged signature in a %s: the rest of it is ignored (%d such digests)",
                self.table.self_id,
                what,
                self.forged_digests,
            )
