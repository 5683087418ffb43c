"""The status table shows each member's link as this peer measured it; bad values don't crash."""

from __future__ import annotations

import pytest
from swarmnode.node.cli.status_table import format_status_table

pytestmark = pytest.mark.timeout(10)


def test_links_shown_per_member() -> None:
    status = {
        "self": {"peer_id": "a", "addr": "198.18.1.2:7070", "step": 5, "acc": 0.5,
                 "links": [{"addr": "198.18.1.3:7070", "rtt_ms": 2.5, "mbit_s": 93.1}]},
        "members": [
            {"peer_id": "b", "addr": "198.18.1.3:7070", "state": "alive", "last_heard_s": 0.2},
            {"peer_id": "c", "addr": "198.18.1.4:7070", "state": "alive", "last_heard_s": 0.1},
        ],
    }  # fmt: skip
    lines = format_status_table(status).splitlines()
    assert "rtt" in lines[0] and "link" in lines[0]
    row_b = next(ln for ln in lines if ln.startswith("b "))
    assert "2.5 ms" in row_b and "93.1 Mbit/s" in row_b
    row_c = next(ln for ln in lines if ln.startswith("c "))
    assert row_c.rstrip().endswith("-")


@pytest.mark.parametrize("links", [None, "x", [1, None], [{"addr": None, "rtt_ms": "y"}]])
def test_malformed_links_do_not_crash(links: object) -> None:
    status = {"self": {"peer_id": "a", "links": links}, "members": [{"peer_id": "b"}]}
    assert "b" in format_status_table(status)


def test_the_table_says_how_old_other_peers_progress_may_be() -> None:
    alone = format_status_table({"self": {"peer_id": "a"}, "members": []})
    assert "minutes old" not in alone
    status = {"self": {"peer_id": "a"}, "members": [{"peer_id": "b", "state": "alive"}]}
    assert format_status_table(status).splitlines()[-1].startswith("(step, loss and acc")


def test_this_peers_utilization_is_a_column_and_the_others_show_none() -> None:
    status = {
        "self": {"peer_id": "me", "addr": "a:1", "step": 5, "utilization": 0.375},
        "members": [{"peer_id": "you", "addr": "b:2", "state": "alive"}],
    }
    lines = format_status_table(status).splitlines()
    assert "util" in lines[0].split()
    util_col = lines[0].split().index("util")
    assert lines[2].split()[util_col] == "37.5%"
    assert lines[3].split()[util_col] == "-"


def test_a_long_name_is_clipped() -> None:
    """Issue 34, item 13: one member's 200-character name must not widen the table."""
    status = {
        "self": {"peer_id": "a", "name": "me"},
        "members": [{"peer_id": "b", "name": "n" * 200 + "\n" + "x", "state": "alive"}],
    }
    lines = format_status_table(status).splitlines()
    assert max(len(ln) for ln in lines[:4]) < 120
    assert "n" * 23 + "…" in lines[3] and "\n" not in lines[3]


def test_a_member_s_clock_is_shown_where_it_is_off_and_refused_where_beyond() -> None:
    """Issue 34, item 15: a member whose clock is too far off is listed alive by its heartbeats
    while nothing of it is exchanged; the table says so rather than show it alive and silent."""
    status = {
        "self": {"peer_id": "a"},
        "members": [
            {"peer_id": "b", "state": "alive", "clock": "tolerated", "clock_s": 90.2},
            {"peer_id": "c", "state": "alive", "clock": "refused", "clock_s": -400.0},
            {"peer_id": "d", "state": "alive", "clock": None, "clock_s": None},
            {"peer_id": "e", "state": "alive", "clock": "refused", "clock_s": "x"},
            {"peer_id": "f", "state": "alive", "clock": "refused", "clock_s": float("nan")},
        ],
    }
    lines = format_status_table(status).splitlines()
    col = lines[0].index("clock")
    cells = {ln.split()[0]: ln[col:].split("  ")[0].strip() for ln in lines[2:8]}
    want = {"a": "-", "b": "+90s", "c": "-400s refused", "d": "-", "e": "-", "f": "-"}
    assert cells == want, cells
