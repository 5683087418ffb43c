"""Watch a lab run to its end: poll every peer's status and link counters, then summarise.

A row per poll and peer: t (seconds since the lab started), step, acc (test accuracy or None),
sent (bytes the peer put on its link). The report names, per peer, its final accuracy (from its
--summary-json), wall time, bytes sent, and the first time its polled accuracy reached
`target`; and the swarm's time to target (every peer at or above it).
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from scripts.netlab.lab import Lab


def poll(lab: Lab) -> list[dict[str, Any]]:
    rows = []
    t = lab.elapsed()
    for p in lab.peers:
        row: dict[str, Any] = {"t": round(t, 2), "peer": p.index, "sent": lab.sent_bytes(p.index)}
        if p.proc.poll() is None:
            try:
                s = lab.status(p.index, timeout=1.0)["self"]
                row.update(step=s.get("step"), acc=s.get("acc"), links=s.get("links"))
            except (OSError, ValueError):
                row["unreachable"] = True
        rows.append(row)
    return rows


def watch(lab: Lab, *, every: float, timeout: float, events: Any = None) -> list[dict[str, Any]]:
    """Poll until every peer has exited (or `timeout`); `events(lab, t)` runs at each poll."""
    rows: list[dict[str, Any]] = []
    deadline = time.monotonic() + timeout
    while lab.running() and time.monotonic() < deadline:
        if events is not None:
            events(lab, lab.elapsed())
        rows.extend(poll(lab))
        time.sleep(every)  # the poll period of a recorder, not a wait for some state
    rows.extend(poll(lab))
    return rows


def report(lab: Lab, rows: list[dict[str, Any]], target: float | None) -> dict[str, Any]:
    """Stops the peers still running (their summary is written as they leave), then reports;
    the network stays up until the lab is closed."""
    lab.stop_peers()
    summaries = lab.summaries()
    peers = []
    for p, summ in zip(lab.peers, summaries, strict=True):
        mine = [r for r in rows if r["peer"] == p.index]
        reached = [r["t"] for r in mine if target is not None and (r.get("acc") or 0) >= target]
        peers.append(
            {
                "peer": p.index,
                "addr": p.addr,
                "rate_bps": p.link.rate_bps,
                "exit": p.proc.returncode,
                "final_acc": None if summ is None else summ.get("test_accuracy"),
                # from the release when the lab held its peers (their own clock started earlier)
                "wall_s": _wall(summ, lab.held_s(p.index)),
                "sent_bytes": lab.sent_bytes(p.index),
                "t_target": reached[0] if reached else None,
                "last_links": next((r["links"] for r in reversed(mine) if r.get("links")), None),
            }
        )
    swarm_t = None
    if target is not None:
        by_t: dict[float, dict[int, float]] = {}
        for r in rows:
            by_t.setdefault(r["t"], {})[r["peer"]] = r.get("acc") or 0.0
        for t in sorted(by_t):
            accs = by_t[t]
            if len(accs) == len(lab.peers) and min(accs.values()) >= target:
                swarm_t = t
                break
    return {"target": target, "swarm_t_target": swarm_t, "peers": peers}


def _wall(summary: dict[str, Any] | None, held_s: float) -> float | None:
    wall = None if summary is None else summary.get("wall_s")
    return None if wall is None else wall - held_s


def save(out: Path, rep: dict[str, Any], rows: list[dict[str, Any]]) -> None:
    out.mkdir(parents=True, exist_ok=True)
    (out / "report.json").write_text(json.dumps(rep, indent=1))
    (out / "series.json").write_text(json.dumps(rows))
