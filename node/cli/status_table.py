"""Render a peer's `/v1/status` JSON as the table `swarmnode status` prints.

Pure formatting, no I/O: the same function serves the CLI and the demo's final table.
"""

from __future__ import annotations

import math
from typing import Any

from swarmnode.gossip.membership import PROGRESS_RESEAL_S

# who each member is and how far it got: the plain table and the watch view (watch_view.py) both
MEMBER_COLUMNS = (
    ("peer", "peer_id"),
    ("name", "name"),
    ("address", "addr"),
    ("device", "device"),
    ("state", "state"),
    ("step", "step"),
    ("loss", "loss"),
    ("acc", "acc"),
)
COLUMNS = (
    *MEMBER_COLUMNS,
    ("reach", "reach"),  # direct, or outbound (nobody can dial it: it dials out; issue 31)
    ("clock", "clock_s"),  # its clock minus this peer's, where over 30 s; "refused" beyond 300
    ("util", "utilization"),  # this peer only: the share of its time spent training
    ("heard", "last_heard_s"),
    ("rtt", "rtt_ms"),  # this peer's measurement of its link to the member (gossip.link.stats)
    ("link", "mbit_s"),
)


# a cell of text another peer chose (its name, its address) is clipped to this many characters:
# a 200-character name must not widen every row of the table (issue 34)
CLIP = {"name": 24, "addr": 40, "device": 16, "state": 10, "reach": 10}


def clip(text: str, width: int) -> str:
    """`text`, or its first `width - 1` characters and an ellipsis; one line whatever it holds."""
    one_line = " ".join(text.split())
    return one_line if len(one_line) <= width else one_line[: width - 1] + "…"


PROGRESS_NOTE = (
    "(step, loss and acc of the other peers are as they last signed them: up to "
    f"{PROGRESS_RESEAL_S / 60:.0f} minutes old; ask a peer itself for its live figures)"
)


def status_rows(status: dict[str, Any]) -> list[dict[str, Any]]:
    """Self first, then the other members sorted by state then id."""
    me = dict(status.get("self", {}), state="self", last_heard_s=0.0)
    # str(): the status comes from another process; a null id must not break the sort
    others = sorted(
        status.get("members", []),
        key=lambda m: (str(m.get("state", "")), str(m.get("peer_id", ""))),
    )
    links = me.get("links")
    by_addr = (
        {ln.get("addr"): ln for ln in links if isinstance(ln, dict)}
        if isinstance(links, list)
        else {}
    )
    rows = [me]
    for m in others:
        if m.get("peer_id") != me.get("peer_id"):
            link = by_addr.get(m.get("addr"), {})
            rows.append(
                {
                    **m,
                    "rtt_ms": link.get("rtt_ms"),
                    "mbit_s": link.get("mbit_s"),
                    "clock_s": clock_cell(m),
                }
            )
    return rows


def clock_cell(member: dict[str, Any]) -> str | None:
    """'+90s' (tolerated) or '+400s refused' (alive by its heartbeats, but nothing of it is
    exchanged: gossip/auth/replay.py); None where the clocks agree."""
    off = member.get("clock_s")
    if not isinstance(off, (int, float)) or isinstance(off, bool) or not math.isfinite(off):
        return None
    return f"{off:+.0f}s" + (" refused" if member.get("clock") == "refused" else "")


def format_status_table(status: dict[str, Any]) -> str:
    rows = [[_cell(key, row.get(key)) for _, key in COLUMNS] for row in status_rows(status)]
    lines = render_table([title for title, _ in COLUMNS], rows)
    if (
        len(rows) > 1
    ):  # other members' progress rides their signed records (gossip.membership.records)
        lines.append(PROGRESS_NOTE)
    return "\n".join(lines)


def render_table(header: list[str], rows: list[list[str]]) -> list[str]:
    """Columns padded to their widest cell, a rule under the header."""
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    lines = ["  ".join(h.ljust(w) for h, w in zip(header, widths, strict=True))]
    lines.append("  ".join("-" * w for w in widths))
    lines += ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)) for r in rows]
    return lines


def _cell(key: str, value: Any) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    number = isinstance(value, (int, float)) and not isinstance(value, bool)
    if not number or key not in ("acc", "loss", "utilization", "last_heard_s", "rtt_ms", "mbit_s"):
        # also a value of the wrong type from a peer: shown, not a crash; clipped
        return clip(str(value), CLIP.get(key, 24))
    if key in ("acc", "utilization"):
        return f"{100 * value:.1f}%"
    if key == "loss":
        return f"{value:.4f}"
    if key == "rtt_ms":
        return f"{value:.1f} ms"
    if key == "mbit_s":
        return f"{value:.1f} Mbit/s"
    return f"{value:.1f}s ago" if value else "now"
