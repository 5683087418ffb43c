"""The page's event lines: membership changes, counters that went up, settings that changed."""

from __future__ import annotations

import pytest
from swarmnode.node.web.events import EventLog, Probe, came_back, member_event, probe_events

pytestmark = pytest.mark.timeout(10)


def test_the_log_numbers_its_events_and_keeps_the_newest() -> None:
    log = EventLog(maxlen=3, clock=lambda: 5.0)
    for i in range(5):
        log.add("join", f"e{i}", local=i % 2 == 0)
    assert [e.seq for e in log.since(0)] == [3, 4, 5] and log.last_seq == 5
    assert [e.text for e in log.since(4)] == ["e4"]
    assert [e.text for e in log.recent(2, local_only=True)] == ["e2", "e4"]
    assert log.recent(0) == [] and log.since(5) == []
    assert log.since(0)[0].to_json() == {
        "seq": 3, "t": 5.0, "kind": "join", "peer": None, "text": "e2", "local": True,
        "incarnation": None,
    }  # fmt: skip


@pytest.mark.parametrize(
    ("old", "new", "kind"),
    [
        (None, "alive", "join"),
        ("alive", "suspect", "suspect"),
        ("suspect", "alive", "alive"),
        ("suspect", "dead", "dead"),
        ("alive", "left", "leave"),
        ("dead", "alive", "rejoin"),
        ("left", "alive", "rejoin"),
        ("alive", "alive", None),  # an incarnation bump alone: nothing to show
    ],
)
def test_membership_changes_become_event_kinds(old, new, kind) -> None:
    said = member_event(old, new, 3)
    assert (said[0] if said else None) == kind
    if kind == "rejoin":
        assert "incarnation 3" in said[1]


def test_probes_log_counters_that_rose_and_settings_that_changed() -> None:
    values = {"refused": 0, "faults": "none", "broken": 0}

    def broken() -> int:
        raise AttributeError("not built yet")

    probes = [
        Probe("refused", "strangers refused", lambda: values["refused"]),
        Probe("fault", "faults", lambda: values["faults"], counter=False),
        Probe("byzantine", "broken", broken),
    ]
    log, last = EventLog(), {}
    probe_events(probes, last, log)  # the first reading is the baseline
    assert log.since(0) == []
    values.update(refused=3, faults="drop=0.1")
    probe_events(probes, last, log)
    probe_events(probes, last, log)  # nothing moved since: nothing new
    values["refused"] = 2  # a counter that goes down (a restart) says nothing
    probe_events(probes, last, log)
    lines = [(e.kind, e.text, e.local) for e in log.since(0)]
    assert lines == [
        ("refused", "strangers refused: +3 (3 in all)", True),
        ("fault", "faults: none -> drop=0.1", True),
    ]


def test_a_join_is_logged_once_per_peer_and_incarnation() -> None:
    """Issue 34, item 7: the table may report the same life of a member twice."""
    log = EventLog()
    for incarnation in (1, 1, 2, 2):
        kind, text = member_event(None, "alive", incarnation)
        log.add(kind, text, "b", incarnation=incarnation)
    log.add("rejoin", member_event("dead", "alive", 3)[1], "b", incarnation=3)
    log.add("rejoin", member_event("dead", "alive", 3)[1], "b", incarnation=3)
    log.add("join", "joined", "c", incarnation=1)  # another peer's first life: news
    log.add("dead", "declared dead (no heartbeat)", "b", incarnation=3)
    log.add("dead", "declared dead (no heartbeat)", "b", incarnation=3)  # deaths are each news
    assert [(e.peer, e.kind, e.incarnation) for e in log.since(0)] == [
        ("b", "join", 1),
        ("b", "join", 2),
        ("b", "rejoin", 3),
        ("c", "join", 1),
        ("b", "dead", 3),
        ("b", "dead", 3),
    ]


@pytest.mark.parametrize(
    ("old", "new", "back"),
    [(None, "alive", True), ("dead", "alive", True), ("left", "alive", True),
     ("alive", "alive", True), ("suspect", "alive", False), ("alive", "dead", False)],
)  # fmt: skip
def test_a_new_life_is_told_from_a_late_heartbeat(old, new, back) -> None:
    assert came_back(old, new) is back


async def test_a_partner_that_comes_back_starts_its_link_figures_afresh() -> None:
    """Issue 34, item 7: a restarted peer's 3 ms link was shown as 999.8 ms, the timeouts of
    its death averaged into its latency under the same address."""
    from types import SimpleNamespace

    from swarmnode.gossip.errors import TransportError
    from swarmnode.gossip.link.stats import MeasuringTransport
    from swarmnode.gossip.membership.views import Change
    from swarmnode.node.peer.page import log_member_changes

    class Inner:
        dead = False

        async def request(self, addr: str, route: str, body: bytes, *, timeout: float) -> bytes:
            if self.dead:
                raise TransportError("no answer")
            return b"ok"

        async def close(self) -> None:
            pass

    inner = Inner()
    links = MeasuringTransport(inner)  # type: ignore[arg-type]
    callbacks = []
    node = SimpleNamespace(
        events=EventLog(), links=links, membership=SimpleNamespace(on_change=callbacks.append)
    )
    log_member_changes(node)  # type: ignore[arg-type]
    await links.request("b:1", "gossip", b"x", timeout=1.0)
    inner.dead = True
    for _ in range(5):
        with pytest.raises(TransportError):
            await links.request("b:1", "gossip", b"x", timeout=1.0)
    assert links.links["b:1"].rtt_s > 0.5  # its death, counted as latency
    (changed,) = callbacks
    changed(Change("b", "b:1", "dead", "alive", 2))  # back, under a new incarnation
    inner.dead = False
    await links.request("b:1", "gossip", b"x", timeout=1.0)
    assert links.links["b:1"].rtt_s < 0.1 and links.links["b:1"].failures == 0
    assert [e.kind for e in node.events.since(0)] == ["rejoin"]
