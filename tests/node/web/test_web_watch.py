"""`SwarmWatch`: fresh figures from every member over real HTTP, their age, stale marks, rates,
the exchange graph, the shared cache, the bounded fan-out, the event feed and the stream.

The other members are small aiohttp servers on 127.0.0.1 answering `GET /v1/figures` with what
each test gives them; the watch's clock is a fake one the tests move (ages and rates are exact).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
import time
from collections.abc import AsyncIterator
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer
from swarmnode.kernels.errors import SwarmnodeError
from swarmnode.node.web import watch as watch_mod
from swarmnode.node.web.events import EventLog
from swarmnode.node.web.watch import Busy, Sources, SwarmWatch, swarm_figures

pytestmark = pytest.mark.timeout(30)

ME = "me000000"


def figures(pid: str, **kw: Any) -> dict[str, Any]:
    return {"peer_id": pid, "name": pid[:1], "addr": f"addr-{pid}", "state": "alive",
            "device": "cpu", "step": 500, "acc": 0.9, "loss": 0.25, "consensus_dist": 0.5,
            "exchange": {"rounds": 10, "bytes_sent": 1000}, "links": [], **kw}  # fmt: skip


class FakePeer:
    """A member answering `GET /v1/figures` with `body` (or `status`), counting the asks."""

    def __init__(self, pid: str) -> None:
        self.pid = pid
        self.body: Any = {"self": figures(pid), "events": []}
        self.status = 200
        self.hits = 0
        self.server: TestServer | None = None

    async def start(self) -> FakePeer:
        async def handle(_request: web.Request) -> web.Response:
            self.hits += 1
            if self.status != 200:
                return web.Response(status=self.status, text="no")
            return web.Response(text=json.dumps(self.body), content_type="application/json")

        app = web.Application()
        app.router.add_get("/v1/figures", handle)
        self.server = TestServer(app, host="127.0.0.1", port=0)
        await self.server.start_server()
        return self

    @property
    def addr(self) -> str:
        assert self.server is not None
        return f"127.0.0.1:{self.server.port}"

    def row(self, **kw: Any) -> dict[str, Any]:
        """Its row in the watching peer's member table (gossiped figures: old)."""
        return {"peer_id": self.pid, "name": self.pid[:1], "addr": self.addr, "state": "alive",
                "step": 7, "acc": 0.1, "loss": 2.0, "last_heard_s": 0.2, **kw}  # fmt: skip


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Harness:
    def __init__(self) -> None:
        self.now = 100.0
        self.members: list[dict[str, Any]] = []
        self.events = EventLog()
        self.me = figures(ME, addr="127.0.0.1:1", state="alive")
        self.watch = SwarmWatch(
            Sources(lambda: ME, lambda: self.me, lambda: self.members, self.events),
            clock=lambda: self.now,
        )

    async def snap(self, advance: float = 0.0) -> dict[str, Any]:
        self.now += advance
        snap = await self.watch.now()
        assert snap is not None
        return snap


def rows_of(snap: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {r["peer_id"]: r for r in snap["members"]}


@pytest.fixture
async def peers() -> AsyncIterator[list[FakePeer]]:
    started = [await FakePeer(pid).start() for pid in ("b0000000", "c0000000", "d0000000")]
    yield started
    for p in started:
        assert p.server is not None
        await p.server.close()


@pytest.fixture
async def h() -> AsyncIterator[Harness]:
    harness = Harness()
    yield harness
    await harness.watch.close()


async def test_fresh_figures_replace_gossip_and_say_their_age(h, peers):
    b, c, _ = peers
    dead = {"peer_id": "x0000000", "addr": f"127.0.0.1:{closed_port()}", "state": "dead",
            "step": 3, "acc": 0.2}  # fmt: skip
    unreachable = {**dead, "peer_id": "y0000000", "state": "alive"}
    h.members = [b.row(), c.row(), dead, unreachable]
    rows = rows_of(await h.snap())
    assert rows[ME]["state"] == "self" and rows[ME]["age_s"] == 0 and not rows[ME]["stale"]
    assert rows[b.pid]["step"] == 500 and rows[b.pid]["acc"] == 0.9  # its own, not gossip's 7
    assert rows[b.pid]["source"] == "fresh" and rows[b.pid]["age_s"] == 0
    assert not rows[b.pid]["stale"]
    assert "x0000000" not in [m["peer_id"] for m in h.watch._targets(h.members)]  # not asked
    assert rows["x0000000"]["stale"] and rows["x0000000"]["why"] == "dead"
    y = rows["y0000000"]  # never reached: the gossiped figures, stale, no age
    assert y["source"] == "gossip" and y["stale"] and y["age_s"] is None and y["step"] == 3
    assert y["why"] == "refused"  # a short reason, never the client library's text

    b.status = 503  # b stops answering: its last figures stay, stale, with their age
    rows = rows_of(await h.snap(advance=2.0))
    assert rows[b.pid]["step"] == 500 and rows[b.pid]["age_s"] == 2.0
    assert rows[b.pid]["stale"] and rows[b.pid]["why"] == "answered 503"
    assert not rows[c.pid]["stale"] and rows[c.pid]["age_s"] == 0


async def test_a_peer_cannot_pass_on_what_it_likes(h, peers):
    b, c, d = peers
    b.body = {"self": figures(b.pid, acc=float("nan"), name="n" * 10_000, links="x"), "events": 5}
    c.body = {"self": figures("someone-else")}  # an address now held by another peer
    d.body = [1, 2]
    h.members = [b.row(), c.row(), d.row()]
    rows = rows_of(await h.snap())
    assert rows[b.pid]["acc"] is None and len(rows[b.pid]["name"]) == 200
    assert rows[c.pid]["why"] == "another peer" and rows[c.pid]["source"] == "gossip"
    assert rows[d.pid]["why"] == "bad answer"
    json.dumps(await h.snap(), allow_nan=False)  # what the page parses: no NaN anywhere
    assert h.watch.hello().startswith(b"event: hello\ndata: {")


async def test_rates_and_the_exchange_graph(h, peers):
    b, c, _ = peers
    link_to_me = {"addr": "127.0.0.1:1", "peer_id": ME, "exchange_s_ago": 5.0, "rtt_ms": 2.0,
                  "bytes_sent": 100, "bytes_received": 100}  # fmt: skip
    stale_link = {"addr": c.addr, "exchange_s_ago": 90.0, "bytes_sent": 1, "bytes_received": 1}
    b.body = {"self": figures(b.pid, links=[link_to_me, stale_link])}
    h.members = [b.row(), c.row()]
    first = await h.snap()
    assert rows_of(first)[b.pid]["rounds_per_s"] is None  # one reading: no rate yet
    b.body = {
        "self": figures(
            b.pid,
            exchange={"rounds": 14, "bytes_sent": 5000},
            links=[{**link_to_me, "bytes_sent": 300, "bytes_received": 300}, stale_link],
        )
    }
    snap = await h.snap(advance=2.0)
    row = rows_of(snap)[b.pid]
    assert row["rounds_per_s"] == 2.0 and row["bytes_per_s"] == 2000.0
    assert snap["swarm"]["rounds_per_s"] == 2.0  # c's counters did not move; mine has one read
    (edge,) = snap["edges"]  # c's exchange was 90 s ago: out of the last minute
    assert {edge["a"], edge["b"]} == {b.pid, ME}
    assert edge["rtt_ms"] == 2.0 and edge["bytes_per_s"] == 200.0 and edge["ago_s"] == 5.0

    b.status = 503  # silent: its last rates are no rates now; its exchange is still recent
    snap = await h.snap(advance=1.0)
    assert rows_of(snap)[b.pid]["rounds_per_s"] is None and snap["swarm"]["rounds_per_s"] == 0.0
    (edge,) = snap["edges"]
    assert edge["bytes_per_s"] == 0.0 and edge["ago_s"] == 6.0


async def test_one_refresh_serves_every_caller_within_a_second(h, peers):
    b, _, _ = peers
    h.members = [b.row()]
    await asyncio.gather(h.snap(), h.snap(), h.snap())
    await h.snap(advance=0.5)
    assert b.hits == 1
    await h.snap(advance=0.5)
    assert b.hits == 2


async def test_the_fanout_is_bounded_and_takes_turns(h, peers, monkeypatch):
    monkeypatch.setattr(watch_mod, "FANOUT_MAX", 2)
    h.members = [p.row() for p in peers]
    await h.snap()
    assert sum(p.hits for p in peers) == 2
    await h.snap(advance=1.0)
    assert sum(p.hits for p in peers) == 4 and all(p.hits >= 1 for p in peers)


async def test_the_feed_takes_my_events_and_the_others_local_ones_once(h, peers):
    b, c, _ = peers
    h.events.add("dead", "declared dead (no heartbeat)", c.pid)
    fault = {"seq": 1, "t": time.time(), "kind": "fault", "peer": None, "text": "faults: a -> b"}
    b.body = {"self": figures(b.pid), "events": [fault, {"seq": "x", "t": 1, "text": "bad"}]}
    h.members = [b.row(), c.row(state="dead")]
    await h.snap()
    await h.snap(advance=1.0)
    h.events.add("join", "joined", "z0000000")
    await h.snap(advance=1.0)
    feed = [(e["peer"], e["at"], e["kind"], e["name"]) for e in h.watch.recent_events()]
    assert feed == [
        (c.pid, ME, "dead", "c"),
        (b.pid, b.pid, "fault", "b"),  # about b itself: it happened in b
        ("z0000000", ME, "join", None),
    ]


async def test_a_restarted_peer_starts_its_counters_and_events_again(h, peers):
    b, _, _ = peers
    h.members = [b.row()]
    fault = {"seq": 5, "t": time.time(), "kind": "fault", "peer": None, "text": "before"}
    b.body = {"self": figures(b.pid, uptime_s=100.0), "events": [fault]}
    await h.snap()
    again = {**fault, "seq": 1, "text": "after the restart"}
    b.body = {"self": figures(b.pid, uptime_s=1.0, exchange={"rounds": 0, "bytes_sent": 0}),
              "events": [again]}  # fmt: skip
    snap = await h.snap(advance=1.0)
    assert [e["text"] for e in h.watch.recent_events()] == ["before", "after the restart"]
    assert rows_of(snap)[b.pid]["rounds_per_s"] is None  # no rate across the restart
    h.members = []  # expired from the table: forgotten
    await h.snap(advance=1.0)
    assert b.pid not in h.watch._seen


async def test_the_stream_sends_hello_then_frames_and_ends_on_close(h, peers, monkeypatch):
    monkeypatch.setattr(watch_mod, "FRAME_EVERY_S", 0.05)
    b, _, _ = peers
    h.members = [b.row()]
    got = []
    async with h.watch.viewer() as frames:
        async for frame in frames:
            got.append(frame)
            h.now += 1.0
            if len(got) == 3:
                h.events.add("leave", "left the swarm", b.pid)
            if len(got) == 5:
                await h.watch.close()
    assert got[0].startswith(b"event: hello\ndata: ") and got[0].endswith(b"\n\n")
    hello = json.loads(got[0].split(b"data: ", 1)[1])
    assert {r["peer_id"] for r in hello["members"]} == {ME, b.pid} and "history" in hello
    frames = [json.loads(f[len(b"data: ") :]) for f in got[1:]]
    assert all(f["point"]["values"].keys() == {ME, b.pid} for f in frames)
    sent = [e["text"] for f in frames for e in f["events"]]
    assert sent == ["left the swarm"]  # once, in the frame after it happened
    assert h.watch.viewers == 0
    async with h.watch.viewer() as frames:  # closed: no stream, no pump, no fetch any more
        assert [f async for f in frames] == []
    hits = b.hits
    assert await h.snap(advance=5.0) is not None and b.hits == hits


async def test_viewers_beyond_the_cap_are_refused(h, monkeypatch):
    monkeypatch.setattr(watch_mod, "MAX_VIEWERS", 1)
    async with h.watch.viewer():
        with pytest.raises(Busy):
            async with h.watch.viewer():
                pass
    async with h.watch.viewer():  # the first one left: room again
        pass


def test_swarm_figures_count_live_honest_peers_only():
    def row(state, acc, **kw):
        return {"state": state, "acc": acc, "byzantine": None, "consensus_dist": None,
                "rounds_per_s": None, "bytes_per_s": None, **kw}  # fmt: skip

    rows = [
        row("self", 0.8, consensus_dist=0.2, rounds_per_s=1.0),
        row("alive", 0.6, consensus_dist=0.4, rounds_per_s=2.5, bytes_per_s=10.0),
        row("alive", 0.05, byzantine="alie"),
        row("dead", 0.99),
    ]
    s = swarm_figures(rows)
    assert (s["members"], s["live"]) == (4, 2)
    assert (s["acc_best"], s["acc_worst"]) == (0.8, 0.6) and s["acc_median"] == pytest.approx(0.7)
    assert s["consensus_dist"] == pytest.approx(0.3) and s["rounds_per_s"] == 3.5
    assert s["bytes_per_s"] == 10.0


def test_a_peer_that_left_is_not_counted_as_a_member_not_live():
    """Issue 34 item 9: `2 of 3 live` after a clean leave; a dead peer still counts."""
    rows = [{"state": state, "acc": None, "byzantine": None, "consensus_dist": None,
             "rounds_per_s": None, "bytes_per_s": None}
            for state in ("self", "alive", "left")]  # fmt: skip
    assert (swarm_figures(rows)["live"], swarm_figures(rows)["members"]) == (2, 2)
    rows[2]["state"] = "dead"
    assert (swarm_figures(rows)["live"], swarm_figures(rows)["members"]) == (2, 3)


async def test_stale_reasons_are_a_word_or_two(h, peers, monkeypatch):
    """`status --watch` rows must not wrap: never aiohttp's text (issue 34, item 7)."""
    monkeypatch.setattr(watch_mod, "FETCH_TIMEOUT_S", 0.2)
    b, c, d = peers
    gone = {"peer_id": "x0000000", "addr": f"127.0.0.1:{closed_port()}", "state": "alive"}
    late = asyncio.Event()

    async def slow(_request: web.Request) -> web.Response:
        await late.wait()  # never set: the watch's deadline ends the request
        return web.Response(text="{}")

    assert c.server is not None
    c.server.app.router._frozen = False  # the test server's app: one more route for c
    c.server.app.router.add_get("/slow/v1/figures", slow)
    d.body = "not json"
    h.members = [gone, b.row(), {**c.row(), "addr": c.addr + "/slow"}, d.row()]
    b.status = 503
    rows = rows_of(await h.snap())
    whys = {pid: rows[pid]["why"] for pid in ("x0000000", b.pid, c.pid, d.pid)}
    assert whys == {"x0000000": "refused", b.pid: "answered 503", c.pid: "timed out",
                    d.pid: "bad answer"}  # fmt: skip


async def test_a_members_events_are_its_own_rate_bounded_claims(h, peers):
    """Issue 34, item 13: b sends 20 forged lines a fetch about c; they are b's claims about
    itself, a few a minute, in their own share of the feed; this peer's own line stays."""
    b, c, _ = peers
    h.members = [b.row(), c.row()]
    h.events.add("dead", "declared dead (no heartbeat)", c.pid)  # what this peer saw
    seq = 0
    for _ in range(30):
        forged = [{"seq": seq + i, "t": time.time(), "kind": "leave", "peer": c.pid,
                   "text": "left the swarm"} for i in range(1, 21)]  # fmt: skip
        seq += 20
        b.body = {"self": figures(b.pid), "events": forged}
        await h.snap(advance=1.0)
    feed = h.watch.feed()
    claims = [e for e in feed if e["claim"]]
    # 30 s at one claim every 5 s, after a burst of 5: 11 at most of b's 600 lines
    assert 0 < len(claims) <= watch_mod.CLAIM_BURST + 30 * watch_mod.CLAIM_RATE + 1
    assert all(e["peer"] == b.pid and e["at"] == b.pid for e in claims)  # about b only
    assert h.watch.claims_dropped == 600 - len(claims)
    mine = [e for e in feed if not e["claim"]]
    assert [(e["peer"], e["kind"]) for e in mine] == [(c.pid, "dead")]


def test_one_members_claims_do_not_move_the_swarm_figures():
    """Issue 34, item 13: accuracy 100 %, step 10^15 and 10^15 rounds a second from one."""

    def row(acc, step, rounds):
        return {"state": "alive", "acc": acc, "step": step, "byzantine": None,
                "consensus_dist": 0.1, "rounds_per_s": rounds, "bytes_per_s": None}  # fmt: skip

    honest = [row(0.95, 1000, 2.0), row(0.96, 1010, 2.5), row(0.97, 990, 3.0)]
    before = swarm_figures(honest)
    after = swarm_figures([*honest, row(1.0, 10**15, 1e15)])
    assert before["acc_best"] == after["acc_best"] == 0.97 and after["left_out"] == 1
    assert after["acc_median"] == pytest.approx(0.965) and after["step"] == 1000
    assert after["rounds_per_s"] <= before["rounds_per_s"] + watch_mod.RATE_CAP_X * 3.0
    # a slow joiner is no liar, but it is left out of best / worst the same way: counted
    assert swarm_figures([*honest, row(0.1, 5, 1.0)])["left_out"] == 1


async def test_held_streams_from_one_address_deny_no_other(h):
    """Issue 34, item 14: seats per address, and a trusted viewer always has one."""
    async with contextlib.AsyncExitStack() as held:
        for _ in range(watch_mod.SEATS_PER_ADDRESS):
            await held.enter_async_context(h.watch.viewer("10.0.0.1"))
        with pytest.raises(Busy, match=r"from 10\.0\.0\.1"):
            await held.enter_async_context(h.watch.viewer("10.0.0.1"))
        others = [f"10.0.1.{i}" for i in range(watch_mod.MAX_VIEWERS)]
        for addr in others[: watch_mod.MAX_VIEWERS - watch_mod.SEATS_PER_ADDRESS]:
            await held.enter_async_context(h.watch.viewer(addr))
        with pytest.raises(Busy, match="viewers already"):  # every public seat taken
            await held.enter_async_context(h.watch.viewer("10.0.2.1"))
        async with h.watch.viewer("127.0.0.1", trusted=True):  # loopback still gets in
            assert h.watch.viewers == watch_mod.MAX_VIEWERS + 1
    assert h.watch.viewers == 0 and h.watch._seats == {}


async def test_a_full_watch_refuses_with_a_swarmnode_error(h):
    # Busy sits under the rooted hierarchy: a caller catching SwarmnodeError catches it
    async with contextlib.AsyncExitStack() as held:
        for _ in range(watch_mod.SEATS_PER_ADDRESS):
            await held.enter_async_context(h.watch.viewer("10.0.0.1"))
        with pytest.raises(SwarmnodeError, match=r"from 10\.0\.0\.1"):
            await held.enter_async_context(h.watch.viewer("10.0.0.1"))
    assert issubclass(watch_mod.BadAnswer, SwarmnodeError) and issubclass(
        watch_mod.BadAnswer, ValueError
    )
