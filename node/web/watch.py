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
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import statistics
import time
from collections import deque
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

import aiohttp
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
FEED_EVENTS = 200
HELLO_EVENTS = 100
MAX_VIEWERS = 32
FETCHED_STATES = ("alive", "suspect")

log = logging.getLogger(__name__)


@dataclass
class Sources:
    """What the watch reads of its peer: its id, its own figures (the `self` of /v1/status;
    None while it starts), the other members' rows of /v1/status, and its event log."""

    peer_id: Callable[[], str]
    own: Callable[[], dict[str, Any] | None]
    members: Callable[[], list[dict[str, Any]]]
    events: EventLog


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
        self._feed: deque[dict[str, Any]] = deque(maxlen=FEED_EVENTS)
        self._feed_seq = 0
        self._own_seq = 0
        self._cursor = 0
        self._session: aiohttp.ClientSession | None = None
        self._pump: asyncio.Task[None] | None = None
        self.viewers = 0
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
            seen.failed = "answered as another peer" if figures else "not a peer's figures"
            return
        self._take(pid, figures, clean_events(raw.get("events")))

    async def _get(self, url: str) -> Any:
        if self._session is None:
            connector = aiohttp.TCPConnector(limit=FANOUT_CONCURRENCY)
            self._session = aiohttp.ClientSession(
                connector=connector, timeout=aiohttp.ClientTimeout(total=FETCH_TIMEOUT_S)
            )
        async with self._session.get(url) as resp:
            if resp.status != 200:
                raise ValueError(f"answered {resp.status}")
            body = await resp.content.read(MAX_FIGURES_BYTES + 1)
            if len(body) > MAX_FIGURES_BYTES:
                raise ValueError("figures too large")
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
        """This peer's events (all: its view of the others too) and the others' local ones."""
        if own_log:
            new = [e.to_json() for e in events]
            self._own_seq = max([self._own_seq, *(e["seq"] for e in new)])
        else:
            new = [e for e in events if e["seq"] > seen.event_seq]
            seen.event_seq = max([seen.event_seq, *(e["seq"] for e in new)])
        for e in sorted(new, key=lambda e: e["t"]):
            self._feed_seq += 1
            about = e.get("peer") or pid
            self._feed.append(
                {
                    "seq": self._feed_seq,
                    "t": e["t"],
                    "kind": e["kind"],
                    "peer": about,
                    "at": pid,
                    "text": e["text"],
                }
            )

    # --- what the page gets ----------------------------------------------------------------

    def _build(self, me: str, own: dict[str, Any], members: list[dict[str, Any]]) -> dict[str, Any]:
        now = self._clock()
        rows = [self._row({**own, "state": "self"}, now)]
        rows += sorted(
            (self._row(m, now) for m in members),
            key=lambda r: (str(r["name"] or "~"), r["peer_id"]),  # named first, then by id
        )
        names = {r["peer_id"]: r["name"] for r in rows}
        for e in self._feed:  # names may come after the event (a joiner's record travels later)
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
        body = {**snap, "history": list(self._history), "events": list(self._feed)[-HELLO_EVENTS:]}
        return b"event: hello\ndata: " + _dumps(body) + b"\n\n"

    def recent_events(self, n: int = 10) -> list[dict[str, Any]]:
        return list(self._feed)[-n:]

    def _publish(self) -> None:
        snap = self._snapshot or {}
        events = [e for e in self._feed if e["seq"] > self._published]
        self._published = self._feed_seq
        self._frame = b"data: " + _dumps({**snap, "events": events}) + b"\n\n"
        self._frame_seq += 1

    @contextlib.asynccontextmanager
    async def viewer(self) -> AsyncIterator[AsyncIterator[bytes]]:
        """Count a viewer while it reads; yields its frames (the hello first), one a second.
        Raises `Busy` beyond `MAX_VIEWERS`."""
        if self.viewers >= MAX_VIEWERS:
            raise Busy(f"{MAX_VIEWERS} viewers already: try again later")
        self.viewers += 1
        try:
            if not self.closed and (self._pump is None or self._pump.done()):
                self._pump = asyncio.create_task(self._run_pump(), name="web-watch-pump")
            yield self._frames()
        finally:
            self.viewers -= 1

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


class Busy(Exception):
    """Too many viewers."""


def swarm_figures(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Figures of the whole swarm over its live honest members (self, alive, suspect; not a
    peer that reports itself byzantine): best, worst and mean accuracy; consensus distance, the
    mean over members of each one's median distance to the models it mixed with lately;
    exchange rounds and parameter bytes per second, summed over the members."""
    live = [r for r in rows if r["state"] in ("self", "alive", "suspect") and not r["byzantine"]]
    accs = [r["acc"] for r in live if r["acc"] is not None]
    dists = [r["consensus_dist"] for r in live if r["consensus_dist"] is not None]
    return {
        "members": len(rows),
        "live": len(live),
        "acc_best": max(accs, default=None),
        "acc_worst": min(accs, default=None),
        "acc_mean": statistics.fmean(accs) if accs else None,
        "consensus_dist": statistics.fmean(dists) if dists else None,
        "rounds_per_s": _sum(r["rounds_per_s"] for r in live),
        "bytes_per_s": _sum(r["bytes_per_s"] for r in live),
    }


def _restarted(before: dict[str, Any] | None, after: dict[str, Any]) -> bool:
    """A peer's uptime went back: a new process under the same id (a restart from its
    checkpoint dir keeps the key); its counters and event numbers start again."""
    old = None if before is None else before.get("uptime_s")
    new = after.get("uptime_s")
    return old is not None and new is not None and new < old


def _sum(values: Any) -> float | None:
    known = [v for v in values if v is not None]
    return sum(known) if known else None


def _why(exc: BaseException) -> str:
    if isinstance(exc, asyncio.TimeoutError):
        return f"no answer within {FETCH_TIMEOUT_S:g} s"
    return " ".join(str(exc).split())[:120] or type(exc).__name__


def _dumps(body: dict[str, Any]) -> bytes:
    return json.dumps(body, separators=(",", ":"), allow_nan=False).encode()
