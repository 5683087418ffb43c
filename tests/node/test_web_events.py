"""The page's event lines: membership changes, counters that went up, settings that changed."""

from __future__ import annotations

import pytest
from swarmnode.node.web.events import EventLog, Probe, member_event, probe_events

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
        "seq": 3, "t": 5.0, "kind": "join", "peer": None, "text": "e2", "local": True
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
