"""Render a peer's `/v1/watch/now` snapshot as the screen `swarmnode status --watch` redraws.

Pure formatting, no I/O. Every figure says how old it is: `now` for the peer asked, seconds
for the others' (fetched by that peer at most a second or two before), `stale` for one the peer
could not refresh (with why), `gossip` for one it never reached (as signed in the member's
record: up to 2 minutes old). Values of the wrong type from a peer are shown, never a crash.
"""

from __future__ import annotations

import math
import time
from typing import Any

from swarmnode.node.cli.status_table import CLIP, MEMBER_COLUMNS, clip, render_table

COLUMNS = (*MEMBER_COLUMNS, ("age", "age"))
EVENT_LINES = 8


def format_watch(snap: dict[str, Any], *, note: str = "") -> str:
    """The whole screen: a headline of swarm figures, the members, the newest events."""
    rows = [r for r in snap.get("members", []) if isinstance(r, dict)]
    lines = [_headline(snap, rows), _swarm_line(snap.get("swarm"))]
    if note:
        lines.append(note)
    lines.append("")
    table = [[_cell(key, row) for _, key in COLUMNS] for row in rows]
    lines += render_table([title for title, _ in COLUMNS], table)
    events = [e for e in snap.get("events", []) if isinstance(e, dict)][-EVENT_LINES:]
    if events:
        lines += ["", "events (newest last):"]
        lines += [_event_line(e, snap.get("self")) for e in events]
    return "\n".join(lines)


def _headline(snap: dict[str, Any], rows: list[dict[str, Any]]) -> str:
    me = next((r for r in rows if r.get("state") == "self"), {})
    who = me.get("name") or me.get("peer_id") or "?"
    return f"the swarm as {who} ({me.get('addr', '?')}) sees it at {_clock(snap.get('t'))}"


def _swarm_line(s: Any) -> str:
    if not isinstance(s, dict):
        return "swarm: -"
    accs = " / ".join(_pct(s.get(k)) for k in ("acc_best", "acc_median", "acc_worst"))
    left_out = s.get("left_out")
    out = f" ({left_out} left out as outliers)" if _number(left_out) and left_out > 0 else ""
    return (
        f"swarm: {s.get('live', '-')} of {s.get('members', '-')} live; "
        f"accuracy best / median / worst {accs}{out}; "
        f"consensus distance {_fmt(s.get('consensus_dist'), '.3f')}; "
        f"{_fmt(s.get('rounds_per_s'), '.1f')} exchange rounds/s; "
        f"{_bytes(s.get('bytes_per_s'))}/s of parameters sent"
    )


def _cell(key: str, row: dict[str, Any]) -> str:
    if key == "age":
        return _age(row)
    value = row.get(key)
    if key == "acc":
        return _pct(value)
    if key == "loss":
        return _fmt(value, ".4f")
    return "-" if value is None else clip(str(value), CLIP.get(key, 24))


def _age(row: dict[str, Any]) -> str:
    if row.get("state") == "self":
        return "now"
    age = row.get("age_s")
    known = _number(age)
    if not row.get("stale"):
        return f"{age:.1f}s" if known else "-"
    why = row.get("why")
    said = f" ({clip(why, 24)})" if isinstance(why, str) and why else ""
    if not known:
        return f"stale: gossip, up to 2 min{said}"
    return f"stale {age:.0f}s{said}"


def _event_line(e: dict[str, Any], me: Any) -> str:
    """A line per event; another peer's view of a third says whose view it is, and a member's
    own line says that it is its claim (what the peer asked did not see itself)."""
    who = clip(str(e.get("name") or str(e.get("peer", "?"))[:12]), CLIP["name"])
    by = e.get("at")
    seen = ""
    if e.get("claim") is True:
        seen = " (its own claim)"
    elif by and by not in (e.get("peer"), me):
        seen = f" (seen by {clip(str(e.get('at_name') or str(by)[:12]), CLIP['name'])})"
    return f"  {_clock(e.get('t'))}  {who}  {clip(str(e.get('text', '')), 120)}{seen}"


def _number(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def _fmt(x: Any, spec: str) -> str:
    return format(x, spec) if _number(x) else "-"


def _pct(x: Any) -> str:
    return f"{100 * x:.1f}%" if _number(x) else "-"


def _bytes(x: Any) -> str:
    if not _number(x):
        return "-"
    for unit in ("B", "kB", "MB"):
        if x < 1000:
            return f"{x:.0f} {unit}" if unit == "B" else f"{x:.1f} {unit}"
        x /= 1000
    return f"{x:.1f} GB"


def _clock(t: Any) -> str:
    return time.strftime("%H:%M:%S", time.localtime(t)) if _number(t) else "--:--:--"
