"""One line per exchange round, for the log (kept apart from the exchange's protocol code)."""

from __future__ import annotations

from typing import Any


def join_notes(*notes: str) -> str:
    return "; ".join(n for n in notes if n)


def describe(r: Any) -> str:
    """`r` is a `swarmnode.gossip.exchange.exchanger.RoundResult`."""
    parts = [f"{r.mode}", f"asked={len(r.asked)}", f"got={len(r.received)}"]
    parts.append("applied" if r.applied else "not applied")
    if r.note:
        parts.append(r.note)
    for pid, why in r.failures.items():
        parts.append(f"{pid}: {why}")
    parts.append(f"{r.duration_s * 1000:.0f} ms")
    return "; ".join(parts)
