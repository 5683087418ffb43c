"""What happened, as the page shows it: one bounded, numbered list of events per peer.

Two sources fill a peer's `EventLog`:

- its membership table's changes (`member_event`): joins, leaves, deaths, suspicions, returns,
  as *this* peer saw them (the same death is seen by every peer: the page shows its own view).
  A join or return is logged once per peer and incarnation (`Event.incarnation`): the table may
  report the same life of a member again (a tombstone forgotten, then the member gossiped
  back), which is no news;
- `watch_probes`, once a second: counters that went up (strangers refused, pushed models refused
  by the clip bound, malformed models rejected) and settings that changed (a fault injected, the
  peer turned byzantine, a slowdown). These happen *in* this peer (`local`): the page of any
  peer gathers them from the others too (node/web/watch.py).

Reading a few integers a second costs nothing on the training path; nothing here is awaited
by the exchange or the membership.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass
from typing import Any

MAX_EVENTS = 200  # kept per log; the page shows the newest
PROBE_EVERY_S = 1.0
ONCE_KINDS = ("join", "rejoin")  # logged once per (peer, incarnation): see the module doc


@dataclass(frozen=True)
class Event:
    seq: int  # 1, 2, ... in the order this log took them
    t: float  # wall-clock seconds (time.time()): the page merges several peers' events by it
    kind: str  # join, rejoin, leave, dead, suspect, alive, refused, fault, byzantine, rejected
    peer: str | None  # the peer it is about (its id), None: the log's own peer
    text: str  # one line, names included
    local: bool = False  # happened in this peer (not this peer's view of another)
    incarnation: int | None = None  # the life of `peer` a membership event is about

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


class EventLog:
    """The newest `maxlen` events, numbered; `since(seq)` gives those after a number."""

    def __init__(self, maxlen: int = MAX_EVENTS, clock: Callable[[], float] = time.time) -> None:
        self._events: deque[Event] = deque(maxlen=maxlen)
        self._clock = clock
        self.last_seq = 0

    def add(
        self,
        kind: str,
        text: str,
        peer: str | None = None,
        *,
        local: bool = False,
        incarnation: int | None = None,
    ) -> Event | None:
        """Log an event; None for a join or return of a life of `peer` already logged."""
        if kind in ONCE_KINDS and incarnation is not None and self._logged(kind, peer, incarnation):
            return None
        self.last_seq += 1
        event = Event(self.last_seq, self._clock(), kind, peer, text, local, incarnation)
        self._events.append(event)
        return event

    def _logged(self, kind: str, peer: str | None, incarnation: int) -> bool:
        return any(
            e.kind == kind and e.peer == peer and e.incarnation == incarnation for e in self._events
        )

    def since(self, seq: int) -> list[Event]:
        return [e for e in self._events if e.seq > seq]

    def recent(self, n: int, *, local_only: bool = False) -> list[Event]:
        chosen = [e for e in self._events if e.local or not local_only]
        return chosen[-n:] if n > 0 else []


# (old state or None for a newcomer, new state) -> event kind; unlisted pairs say nothing
_MEMBER_KINDS = {
    (None, "alive"): "join",
    ("dead", "alive"): "rejoin",
    ("left", "alive"): "rejoin",
    ("suspect", "alive"): "alive",
}


def member_event(old: str | None, new: str, incarnation: int) -> tuple[str, str] | None:
    """(kind, what happened) for a member's state change, or None (nothing worth a line)."""
    if new == "dead":
        return "dead", "declared dead (no heartbeat)"
    if new == "left":
        return "leave", "left the swarm"
    if new == "suspect":
        return "suspect", "suspect (heartbeat late)"
    kind = _MEMBER_KINDS.get((old, new))
    if kind == "join":
        return kind, "joined"
    if kind == "rejoin":
        return kind, f"is back (incarnation {incarnation})"
    if kind == "alive":
        return kind, "alive again"
    return None


def came_back(old: str | None, new: str) -> bool:
    """Whether a member's change is a new life at its address: new in the table, back from dead
    or left, or alive again under a higher incarnation (`old == new == "alive"`: the table
    reports a change of incarnation alone so). A suspect that is heard again is the same life."""
    return new == "alive" and old != "suspect"


@dataclass(frozen=True)
class Probe:
    """Something of this peer read once a second. `counter`: an event when it goes up (by how
    much, and the total); else an event when its value changes (old -> new)."""

    kind: str
    label: str
    read: Callable[[], Any]
    counter: bool = True


def probe_events(probes: Iterable[Probe], last: dict[str, Any], log: EventLog) -> None:
    """Compare each probe with its last reading (`last`, keyed by label); log what moved."""
    for probe in probes:
        try:
            value = probe.read()
        except Exception:  # a part not built yet (the server binds before the network exists)
            continue
        before = last.get(probe.label, value)
        last[probe.label] = value
        if value == before:
            continue
        if probe.counter and isinstance(value, int) and isinstance(before, int):
            if value > before:
                log.add(
                    probe.kind, f"{probe.label}: +{value - before} ({value} in all)", local=True
                )
        else:
            log.add(probe.kind, f"{probe.label}: {_shown(before)} -> {_shown(value)}", local=True)


def _shown(value: Any) -> str:
    return "none" if value in (None, "") else str(value)


async def watch_probes(probes: list[Probe], log: EventLog, every: float = PROBE_EVERY_S) -> None:
    """Run forever (an owned task of the peer): `probe_events` every `every` seconds. The first
    reading is the baseline: what was set at the start is no event."""
    last: dict[str, Any] = {}
    probe_events(probes, last, EventLog())  # baseline, into a log nobody reads
    while True:
        await asyncio.sleep(every)
        probe_events(probes, last, log)
