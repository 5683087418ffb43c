"""`SwarmWatch`: the swarm as one peer's page shows it, each figure at most a second or two old.

Member states are this peer's own view (its membership table). Step, accuracy, loss and the
rest come fresh from each member: the watch asks every live or suspect member for its
`GET /v1/figures` (at most `FANOUT_MAX` a refresh, `FANOUT_CONCURRENCY` at once, each within
`FETCH_TIMEOUT_S`), instead of showing the figures gossiped in member records (up to 2 minutes
old). A member that does not answer keeps its last figures, marked stale with their age; one
never reached shows its gossiped figures, marked stale with no age.

A refresh is shared: one runs at a time, and a snapshot younger than `CACHE_S` is served as is,
to every viewer of the page and to `swarmnode status --watch`. The fan-out runs only while
someone looks (a viewer of the stream, or a `now()` call): an unwatched peer asks nobody.

From consecutive figures of a member the watch derives its rates (exchange rounds and parameter
bytes per second, and the bytes per second on each of its links) and from all of them the swarm
figures (docs/architecture.md, "The swarm page").

What a member says is its claim, not this peer's observation (issue 34):
- the feed's events about a peer are this peer's own view (its event log: its membership
  table); a member's own events come with its figures, are taken as about that member only
  (whatever peer they name), marked `claim`, and rate-bounded per member (`CLAIM_RATE`,
  `CLAIM_BURST`) in a share of the feed of their own (`FEED_CLAIMS`): a member that sends 20
  lines a second cannot push this peer's own lines (a real death) out of the feed;
- the swarm figures are robust: medians, and best / worst over the members whose accuracy lies
  within `OUTLIER_MADS` median absolute deviations of the median (the others are counted in
  `left_out`); a rate counts at most `RATE_CAP_X` times the median rate. One member's 100 % or
  step 10^15 moves neither. (With two members, no statistic can tell which one lies.)

Viewer seats: `MAX_VIEWERS` streams at once, at most `SEATS_PER_ADDRESS` from one address (an
IPv6 viewer by its /64), and `TRUSTED_SEATS` more kept for trusted viewers (loopback, or a
bearer of the swarm's read token: node/web/access.py), so a crowd of held streams from one
address can deny the page to nobody else. A stream that its viewer stops reading is dropped by
the route (node/web/routes.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import math
import statistics
import time
from collections import deque
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

import aiohttp
from swarmnode.gossip.auth import bearer
from swarmnode.gossip.membership import TokenBucket
from swarmnode.kernels.errors import SwarmnodeError
from swarmnode.node.web.events import EventLog
from swarmnode.node.web.figures import clean_events, clean_figures

FETCH_TIMEOUT_S = 1.0
CACHE_S = 1.0
FRAME_EVERY_S = 1.0  # how often the stream sends a frame
STALE_AFTER_S = 3.0  # figures older than this are marked stale
FANOUT_MAX = 32  # members asked per refresh; beyond, in turns
FANOUT_CONCURRENCY = 8
MAX_FIGURES_BYTES = 1 << 20
HISTORY_FRAMES = 900  # chart points kept: 15 minutes at one a second
HISTORY_PEERS = 64  # peers whose lines the chart keeps
EXCHANGE_WINDOW_S = 60.0  # an edge of the exchange graph: a mix within this many seconds
FEED_EVENTS = 200  # this peer's own lines kept in the feed
FEED_CLAIMS = 100  # the members' own lines (their claims) kept beside them
CLAIM_RATE = 0.2  # a member's claims taken per second (one every 5 s), after a burst of
CLAIM_BURST = 5
HELLO_EVENTS = 100
MAX_VIEWERS = 32  # streams of untrusted viewers at once
SEATS_PER_ADDRESS = 4  # of those, from one address (IPv6: one /64)
TRUSTED_SEATS = 8  # streams of trusted viewers (loopback, the read token), beyond MAX_VIEWERS
OUTLIER_MADS = 3.0  # an accuracy this many median absolute deviations off is left out
OUTLIER_FLOOR = 0.005  # the deviation's floor: peers that agree to 0.1 % are no outliers at 1 %
RATE_CAP_X = 10.0  # a member's rate counts at most this many times the median rate
FETCHED_STATES = ("alive", "suspect")

log = logging.getLogger(__name__)


@dataclass
class Sources:
    """What the watch reads of its peer: its id, its own figures (the `self` of /v1/status;
    None while it starts), the other members' rows of /v1/status, its event log, and the
    swarm's read token, which a closed swarm's members ask for (node/web/access.py)."""

    peer_id: Callable[[], str]
    own: Callable[[], dict[str, Any] | None]
    members: Callable[[], list[dict[str, Any]]]
    events: EventLog
    token: str | None = None


@dataclass
class Seen:
    """What the watch knows of one member: its last figures, and the bases of its rates."""

    figures: dict[str, Any] | None = None
    at: float = 0.0  # monotonic time the figures were taken
    failed: str | None = None  # why the last try failed (None: it answered)
    base: tuple[float, float, float] | None = None  # (at, rounds, bytes_sent) before
    rounds_per_s: float | None = None
    bytes_per_s: float | None = None
    link_base: dict[str, tuple[float, float]] = field(default_factory=dict)
    link_rate: dict[str, float] = field(default_factory=dict)  # bytes/s each way, summed
    event_seq: int = 0  # its local events taken so far


class SwarmWatch:
    """The fan-out, its cache, the chart history and the event feed of one peer's page."""

    def __init__(self, sources: Sources, *, clock: Callable[[], float] = time.monotonic) -> None:
        self.src = sources
        self._clock = clock
        self._seen: dict[str, Seen] = {}
        self._lock = asyncio.Lock()
        self._snapshot: dict[str, Any] | None = None
        self._taken_at = -1e18
        self._frame: bytes = b""
        self._frame_seq = 0
        self._published = 0  # the feed's last event sent in a frame
        self._changed = asyncio.Condition()
        self._history: deque[dict[str, Any]] = deque(maxlen=HISTORY_FRAMES)
        self._plotted: set[str] = set()
        self._feed: deque[dict[str, Any]] = deque(maxlen=FEED_EVENTS)  # this peer's view
        self._claims: deque[dict[str, Any]] = deque(maxlen=FEED_CLAIMS)  # the members' own
        self._claim_budget: dict[str, TokenBucket] = {}  # kept across a member's restarts
        self.claims_dropped = 0
        self._feed_seq = 0
        self._own_seq = 0
        self._cursor = 0
        self._session: aiohttp.ClientSession | None = None
        self._pump: asyncio.Task[None] | None = None
        self.viewers = 0  # streams open now, trusted or not
        self._seats: dict[str, int] = {}  # untrusted streams by address (the `seat` key)
        self._trusted = 0
        self.closed = False

    # --- the snapshot ----------------------------------------------------------------------

    async def now(self) -> dict[str, Any] | None:
        """The current snapshot (refreshed if older than `CACHE_S`); None while the peer starts."""
        async with self._lock:
            if not self.closed and self._clock() - self._taken_at >= CACHE_S:
                await self._refresh()
            return self._snapshot

    async def _refresh(self) -> None:
        own = clean_figures(self.src.own())  # the same checks as the others' (finite numbers)
        if own is None:
            return
        me = own["peer_id"]
        self._take(me, own, self.src.events.since(self._own_seq), own_log=True)
        members = self.src.members()
        known = {me, *(str(m.get("peer_id")) for m in members)}
        self._seen = {pid: s for pid, s in self._seen.items() if pid in known}  # expired: forgotten
        self._claim_budget = {p: b for p, b in self._claim_budget.items() if p in known}
        await asyncio.gather(*(self._fetch(m) for m in self._targets(members)))
        self._taken_at = self._clock()
        self._snapshot = self._build(me, own, members)

    def _targets(self, members: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """The members to ask this time: live or suspect, `FANOUT_MAX` at most, in turns."""
        live = [m for m in members if m.get("state") in FETCHED_STATES and m.get("addr")]
        if len(live) <= FANOUT_MAX:
            return live
        start = self._cursor % len(live)
        self._cursor = start + FANOUT_MAX
        return (live[start:] + live[:start])[:FANOUT_MAX]

    async def _fetch(self, member: dict[str, Any]) -> None:
        pid = str(member.get("peer_id"))
        seen = self._seen.setdefault(pid, Seen())
        try:
            raw = await self._get(f"http://{member['addr']}/v1/figures")
        except (aiohttp.ClientError, asyncio.TimeoutError, OSError, ValueError) as exc:
            seen.failed = _why(exc)
            return
        figures = clean_figures(raw.get("self") if isinstance(raw, dict) else None)
        if figures is None or figures["peer_id"] != pid:
            seen.failed = "another peer" if figures else "bad answer"
            return
        self._take(pid, figures, clean_events(raw.get("events")))

    async def _get(self, url: str) -> Any:
        if self._session is None:
            connector = aiohttp.TCPConnector(limit=FANOUT_CONCURRENCY)
            self._session = aiohttp.ClientSession(
                connector=connector, timeout=aiohttp.ClientTimeout(total=FETCH_TIMEOUT_S)
            )
        async with self._session.get(url, headers=bearer(self.src.token)) as resp:
            if resp.status != 200:
                raise BadAnswer(f"answered {resp.status}")
            body = await resp.content.read(MAX_FIGURES_BYTES + 1)
            if len(body) > MAX_FIGURES_BYTES:
                raise BadAnswer("too large")
            return json.loads(body)

    def _take(
        self, pid: str, figures: dict[str, Any], events: list[Any], own_log: bool = False
    ) -> None:
        """Keep a member's new figures; derive its rates from the previous ones; feed events."""
        seen = self._seen.setdefault(pid, Seen())
        if _restarted(seen.figures, figures):  # same id, new process: counters start again
            seen = self._seen[pid] = Seen()
        at = self._clock()
        ex = figures.get("exchange") or {}
        rounds, sent = ex.get("rounds"), ex.get("bytes_sent")
        if seen.base is not None and rounds is not None and sent is not None:
            dt = at - seen.base[0]
            if dt > 0:
                seen.rounds_per_s = max(0.0, (rounds - seen.base[1]) / dt)
                seen.bytes_per_s = max(0.0, (sent - seen.base[2]) / dt)
        if rounds is not None and sent is not None:
            seen.base = (at, rounds, sent)
        for link in figures.get("links") or []:
            moved = (link.get("bytes_sent") or 0) + (link.get("bytes_received") or 0)
            addr = str(link.get("addr"))
            before = seen.link_base.get(addr)
            if before is not None and at > before[0]:
                seen.link_rate[addr] = max(0.0, (moved - before[1]) / (at - before[0]))
            seen.link_base[addr] = (at, moved)
        seen.figures, seen.at, seen.failed = figures, at, None
        self._feed_events(pid, events, seen, own_log)

    def _feed_events(self, pid: str, events: list[Any], seen: Seen, own_log: bool) -> None:
        """This peer's events (all: its view of the others too) and the others' local ones,
        taken as their claims about themselves (see the module doc)."""
        if own_log:
            new = [e.to_json() for e in events]
            self._own_seq = max([self._own_seq, *(e["seq"] for e in new)])
        else:
            new = [e for e in events if e["seq"] > seen.event_seq]
            seen.event_seq = max([seen.event_seq, *(e["seq"] for e in new)])
            new = self._within_budget(pid, new)
        for e in sorted(new, key=lambda e: e["t"]):
            self._feed_seq += 1
            line = {
                "seq": self._feed_seq,
                "t": e["t"],
                "kind": e["kind"],
                # a member speaks for itself only: the peer its line names is not taken
                "peer": (e.get("peer") or pid) if own_log else pid,
                "at": pid,
                "text": e["text"],
                "claim": not own_log,
            }
            (self._feed if own_log else self._claims).append(line)

    def _within_budget(self, pid: str, events: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """The newest of a member's lines its claim budget pays for; the rest dropped."""
        now = self._clock()
        budget = self._claim_budget.get(pid)
        if budget is None:
            budget = self._claim_budget[pid] = TokenBucket(CLAIM_RATE, CLAIM_BURST, now)
        kept = [e for e in reversed(events) if budget.take(now)]
        self.claims_dropped += len(events) - len(kept)
        return kept[::-1]

    def feed(self) -> list[dict[str, Any]]:
        """The feed in order: this peer's own lines and the members' claims, by number."""
        return sorted([*self._feed, *self._claims], key=lambda e: e["seq"])

    # --- what the page gets ----------------------------------------------------------------

    def _build(self, me: str, own: dict[str, Any], members: list[dict[str, Any]]) -> dict[str, Any]:
        now = self._clock()
        rows = [self._row({**own, "state": "self"}, now)]
        rows += sorted(
            (self._row(m, now) for m in members),
            key=lambda r: (str(r["name"] or "~"), r["peer_id"]),  # named first, then by id
        )
        names = {r["peer_id"]: r["name"] for r in rows}
        for e in (
            *self._feed,
            *self._claims,
        ):  # names may come after the event (a joiner's record travels later)
            e["name"], e["at_name"] = names.get(e["peer"]), names.get(e["at"])
        point = self._point(rows)
        return {
            "t": time.time(),
            "self": me,
            "members": rows,
            "swarm": swarm_figures(rows),
            "edges": self._edges(rows, now),
            "point": point,
        }

    def _row(self, member: dict[str, Any], now: float) -> dict[str, Any]:
        pid = str(member.get("peer_id"))
        seen = self._seen.get(pid)
        fetched = seen.figures if seen is not None else None  # its own, at `seen.at`
        figures = fetched if fetched is not None else member  # else: as gossiped
        age = now - seen.at if seen is not None and fetched is not None else None
        why = seen.failed if seen is not None else None
        state = member.get("state")
        if why is None and state not in (*FETCHED_STATES, "self"):
            why = state  # dead or left: not asked any more
        stale = state != "self" and (age is None or age > STALE_AFTER_S or why is not None)
        live = seen is not None and not stale  # rates of the last readings: only while current
        return {
            "peer_id": pid,
            "name": figures.get("name") or member.get("name"),
            "addr": member.get("addr"),
            "reach": member.get("reach"),  # outbound: it dials, nobody dials it (issue 31)
            "clock": member.get("clock"),  # its clock off this peer's: tolerated, or refused
            "clock_s": member.get("clock_s"),
            "state": state,
            "device": figures.get("device"),
            "step": figures.get("step"),
            "acc": figures.get("acc"),
            "loss": figures.get("loss"),
            "samples_per_s": figures.get("samples_per_s") if fetched else None,
            "consensus_dist": figures.get("consensus_dist") if fetched else None,
            "byzantine": figures.get("byzantine") if fetched else None,
            "faults": figures.get("faults") if fetched else None,
            "rounds_per_s": seen.rounds_per_s if live else None,  # type: ignore[union-attr]
            "bytes_per_s": seen.bytes_per_s if live else None,  # type: ignore[union-attr]
            "last_heard_s": member.get("last_heard_s"),
            "age_s": None if age is None else round(age, 2),
            "source": "gossip" if fetched is None else "fresh",
            "stale": stale,
            "why": why,
        }

    def _edges(self, rows: list[dict[str, Any]], now: float) -> list[dict[str, Any]]:
        """Who mixed with whom within `EXCHANGE_WINDOW_S`: one edge per pair, with the link's
        latency and bulk throughput as measured by the side that started the exchange, and the
        bytes per second both ways."""
        by_addr = {r["addr"]: r["peer_id"] for r in rows if r.get("addr")}
        edges: dict[tuple[str, str], dict[str, Any]] = {}
        for row in rows:
            seen = self._seen.get(row["peer_id"])
            if seen is None or seen.figures is None:
                continue
            age = now - seen.at
            for link in seen.figures.get("links") or []:
                ago = link.get("exchange_s_ago")
                other = link.get("peer_id") or by_addr.get(link.get("addr"))
                if ago is None or other is None or ago + age > EXCHANGE_WINDOW_S:
                    continue
                key = (min(row["peer_id"], other), max(row["peer_id"], other))
                edge = edges.setdefault(key, {"a": key[0], "b": key[1], "bytes_per_s": 0.0})
                edge["ago_s"] = min(edge.get("ago_s", ago + age), round(ago + age, 1))
                if not row["stale"]:  # a silent peer's last rate is no rate now
                    edge["bytes_per_s"] += seen.link_rate.get(str(link.get("addr")), 0.0)
                for k in ("rtt_ms", "mbit_s"):
                    if link.get(k) is not None:
                        edge[k] = link[k]
        return sorted(edges.values(), key=lambda e: (e["a"], e["b"]))

    def _point(self, rows: list[dict[str, Any]]) -> dict[str, Any]:
        """One chart point: accuracy and loss of every member with fresh, unstale figures."""
        values = {}
        for r in rows:
            if r["stale"] or r["acc"] is None:
                continue
            if r["peer_id"] not in self._plotted and len(self._plotted) >= HISTORY_PEERS:
                continue
            self._plotted.add(r["peer_id"])
            values[r["peer_id"]] = [r["acc"], r["loss"]]
        point = {"t": round(time.time(), 3), "values": values}
        self._history.append(point)
        return point

    # --- the stream ------------------------------------------------------------------------

    def hello(self) -> bytes:
        """What a new viewer gets first: the snapshot, the chart history, the recent events."""
        snap = self._snapshot or {}
        body = {**snap, "history": list(self._history), "events": self.feed()[-HELLO_EVENTS:]}
        return b"event: hello\ndata: " + _dumps(body) + b"\n\n"

    def recent_events(self, n: int = 10) -> list[dict[str, Any]]:
        return self.feed()[-n:]

    def _publish(self) -> None:
        snap = self._snapshot or {}
        events = [e for e in self.feed() if e["seq"] > self._published]
        self._published = self._feed_seq
        self._frame = b"data: " + _dumps({**snap, "events": events}) + b"\n\n"
        self._frame_seq += 1

    @contextlib.asynccontextmanager
    async def viewer(
        self, seat: str = "", *, trusted: bool = False
    ) -> AsyncIterator[AsyncIterator[bytes]]:
        """Count a viewer while it reads; yields its frames (the hello first), one a second.
        `seat`: the viewer's address (its /64 for IPv6), `trusted`: loopback or the read token.
        Raises `Busy` when no seat is free for it (see the module doc)."""
        self._sit(seat, trusted)
        try:
            if not self.closed and (self._pump is None or self._pump.done()):
                self._pump = asyncio.create_task(self._run_pump(), name="web-watch-pump")
            yield self._frames()
        finally:
            self._stand(seat, trusted)

    def _sit(self, seat: str, trusted: bool) -> None:
        if trusted:
            if self._trusted >= TRUSTED_SEATS:
                raise Busy(f"{TRUSTED_SEATS} trusted viewers already: try again later")
            self._trusted += 1
        else:
            if self._seats.get(seat, 0) >= SEATS_PER_ADDRESS:
                raise Busy(f"{SEATS_PER_ADDRESS} viewers from {seat or 'one address'} already")
            if sum(self._seats.values()) >= MAX_VIEWERS:
                raise Busy(f"{MAX_VIEWERS} viewers already: try again later")
            self._seats[seat] = self._seats.get(seat, 0) + 1
        self.viewers += 1

    def _stand(self, seat: str, trusted: bool) -> None:
        self.viewers -= 1
        if trusted:
            self._trusted -= 1
        elif self._seats[seat] > 1:
            self._seats[seat] -= 1
        else:
            del self._seats[seat]

    async def _frames(self) -> AsyncIterator[bytes]:
        async with self._changed:
            await self._changed.wait_for(lambda: self._snapshot is not None or self.closed)
        if self.closed:
            return
        yield self.hello()
        sent = self._frame_seq
        while not self.closed:
            async with self._changed:
                await self._changed.wait_for(lambda s=sent: self._frame_seq != s or self.closed)
            if self.closed:
                return
            sent = self._frame_seq
            yield self._frame

    async def _run_pump(self) -> None:
        """A frame every `FRAME_EVERY_S` while anyone watches; ends when the last one leaves."""
        while self.viewers > 0 and not self.closed:
            started = self._clock()
            try:
                async with self._lock:
                    await self._refresh()
                if self._snapshot is not None:
                    self._publish()
            except Exception:  # a bug: say so, keep the page alive (the next frame may work)
                log.exception("the swarm page's refresh failed")
            async with self._changed:
                self._changed.notify_all()
            await asyncio.sleep(max(0.0, FRAME_EVERY_S - (self._clock() - started)))

    async def close(self) -> None:
        """End every stream, stop the pump, close the fan-out's connections."""
        self.closed = True
        async with self._changed:
            self._changed.notify_all()
        if self._pump is not None:
            self._pump.cancel()
            await asyncio.gather(self._pump, return_exceptions=True)
        if self._session is not None:
            await self._session.close()


class Busy(SwarmnodeError):
    """Too many viewers."""


class BadAnswer(SwarmnodeError, ValueError):
    """A member answered, but not with figures: its short reason is shown as is."""


def swarm_figures(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Figures of the whole swarm over its live honest members (self, alive, suspect; not a
    peer that reports itself byzantine), robust to one member's claims (see the module doc):
    the median accuracy, best and worst over the inliers (`left_out`: how many were not); the
    median step; consensus distance, the median over members of each one's median distance to
    the models it mixed with lately; exchange rounds and parameter bytes per second, summed
    over the members, each capped at `RATE_CAP_X` x the median."""
    live = [r for r in rows if r["state"] in ("self", "alive", "suspect") and not r["byzantine"]]
    accs = [r["acc"] for r in live if r["acc"] is not None]
    kept = inliers(accs)
    steps = [r["step"] for r in live if r.get("step") is not None]
    dists = [r["consensus_dist"] for r in live if r["consensus_dist"] is not None]
    return {
        # a peer that left said goodbye: no longer a member, where a dead one may be back
        "members": sum(r["state"] != "left" for r in rows),
        "live": len(live),
        "acc_best": max(kept, default=None),
        "acc_worst": min(kept, default=None),
        "acc_median": statistics.median(accs) if accs else None,
        "left_out": len(accs) - len(kept),
        "step": statistics.median_low(steps) if steps else None,
        "consensus_dist": statistics.median(dists) if dists else None,
        "rounds_per_s": capped_sum(r["rounds_per_s"] for r in live),
        "bytes_per_s": capped_sum(r["bytes_per_s"] for r in live),
    }


def inliers(values: list[float]) -> list[float]:
    """The values within `OUTLIER_MADS` median absolute deviations (at least `OUTLIER_FLOOR`)
    of the median; all of them below three (two cannot outvote each other)."""
    if len(values) < 3:
        return list(values)
    mid = statistics.median(values)
    mad = max(statistics.median(abs(v - mid) for v in values), OUTLIER_FLOOR)
    return [v for v in values if abs(v - mid) <= OUTLIER_MADS * mad]


def _restarted(before: dict[str, Any] | None, after: dict[str, Any]) -> bool:
    """A peer's uptime went back: a new process under the same id (a restart from its
    checkpoint dir keeps the key); its counters and event numbers start again."""
    old = None if before is None else before.get("uptime_s")
    new = after.get("uptime_s")
    return old is not None and new is not None and new < old


def capped_sum(values: Any) -> float | None:
    """The sum, each value capped at `RATE_CAP_X` x the median: one member's claimed 10^15
    rounds a second add at most ten typical members' worth."""
    known = [v for v in values if v is not None]
    if not known:
        return None
    moving = [v for v in known if v > 0]  # idle members say nothing of a typical rate
    cap = RATE_CAP_X * statistics.median(moving) if len(moving) >= 3 else math.inf
    return sum(min(v, cap) for v in known)


def _why(exc: BaseException) -> str:
    """A stale reason in a word or two (a row of `status --watch` must not wrap), never the
    client library's text: "timed out", "refused", "unreachable", "bad answer"."""
    if isinstance(exc, asyncio.TimeoutError):
        return "timed out"
    if isinstance(exc, aiohttp.ClientConnectorError):
        return "refused" if isinstance(exc.os_error, ConnectionRefusedError) else "unreachable"
    if isinstance(exc, (aiohttp.ClientResponseError, aiohttp.ClientPayloadError, ValueError)):
        return str(exc) if isinstance(exc, BadAnswer) else "bad answer"
    return "unreachable"


def _dumps(body: dict[str, Any]) -> bytes:
    return json.dumps(body, separators=(",", ":"), allow_nan=False).encode()
