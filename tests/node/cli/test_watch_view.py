"""`swarmnode status --watch`'s screen: every figure with its age, stale ones said so and why."""

from __future__ import annotations

import pytest
from swarmnode.node.cli.watch_view import format_watch

pytestmark = pytest.mark.timeout(10)

ROW = {"addr": "127.0.0.1:1", "device": "cpu", "step": 10, "acc": 0.5, "loss": 1.25}
SNAP = {
    "t": 1_700_000_000.0,
    "self": "aaaa",
    "members": [
        {**ROW, "peer_id": "aaaa", "name": "a", "state": "self", "age_s": 0.0, "stale": False},
        {**ROW, "peer_id": "bbbb", "name": "b", "state": "alive", "age_s": 0.4, "stale": False},
        {**ROW, "peer_id": "cccc", "name": "c", "state": "dead", "age_s": 12.2, "stale": True,
         "why": "timed out"},
        {**ROW, "peer_id": "dddd", "name": "d", "state": "alive", "age_s": None, "stale": True,
         "why": "answered 503"},
    ],
    "swarm": {"members": 4, "live": 3, "acc_best": 0.9, "acc_worst": 0.5, "acc_median": 0.7,
              "consensus_dist": 0.4213, "rounds_per_s": 6.25, "bytes_per_s": 1_234_567},
    "events": [
        {"t": 1_700_000_000.0, "peer": "cccc", "name": "c", "at": "aaaa", "text": "declared dead"},
        {"t": 1_700_000_001.0, "peer": "bbbb", "name": "b", "at": "bbbb",
         "text": "faults: none -> drop=0.1", "claim": True},
    ],
}  # fmt: skip


def rows(screen: str) -> dict[str, str]:
    return {
        ln.split()[0]: ln
        for ln in screen.splitlines()
        if ln[:4] in {"aaaa", "bbbb", "cccc", "dddd"}
    }


def test_each_member_row_says_how_old_its_figures_are() -> None:
    screen = format_watch(SNAP)
    by = rows(screen)
    assert by["aaaa"].rstrip().endswith("now")
    assert by["bbbb"].rstrip().endswith("0.4s") and "50.0%" in by["bbbb"] and "1.2500" in by["bbbb"]
    assert by["cccc"].rstrip().endswith("stale 12s (timed out)")
    assert by["dddd"].rstrip().endswith("stale: gossip, up to 2 min (answered 503)")


def test_the_swarm_figures_and_the_newest_events_are_shown() -> None:
    screen = format_watch(SNAP, note="(not refreshed: no answer)")
    lines = screen.splitlines()
    assert lines[0].startswith("the swarm as a (127.0.0.1:1) sees it at ")
    assert "3 of 4 live" in lines[1] and "90.0% / 70.0% / 50.0%" in lines[1]
    assert "consensus distance 0.421" in lines[1] and "6.2 exchange rounds/s" in lines[1]
    assert "1.2 MB/s" in lines[1]
    assert lines[2] == "(not refreshed: no answer)"
    events = lines[lines.index("events (newest last):") + 1 :]
    assert events[0].endswith("c  declared dead") and events[1].endswith(
        "b  faults: none -> drop=0.1 (its own claim)"
    )


@pytest.mark.parametrize(
    "snap",
    [
        {},
        {"members": [None, 3, {"peer_id": None, "acc": "x", "age_s": "y", "stale": True}]},
        {"members": [], "swarm": 5, "events": [None, {"t": "x"}], "t": float("nan")},
        {"members": [{"state": "alive", "age_s": float("inf"), "loss": True}], "swarm": {}},
    ],
)
def test_malformed_snapshots_do_not_crash(snap: dict) -> None:
    assert "the swarm as" in format_watch(snap)


def test_a_long_name_or_reason_does_not_widen_the_rows() -> None:
    """Issue 34, items 7 and 13: a 200-character name, a long error text from a peer."""
    long = {**SNAP["members"][1], "name": "n" * 200, "why": "x " * 100, "stale": True,
            "addr": "h" * 200}  # fmt: skip
    screen = format_watch({**SNAP, "members": [SNAP["members"][0], long]})
    widths = [len(ln) for ln in screen.splitlines()[3:]]
    assert max(widths) < 160, screen
    assert "n" * 23 + "…" in screen and "n" * 25 not in screen
