"""What another peer's `GET /v1/figures` may carry, kept to known fields of known types.

The page shows text that other peers wrote: every string is cut to a length, every number must
be finite (JSON.parse in a browser refuses NaN), lists are capped. What does not fit is dropped,
never passed on: a peer cannot make the watching peer serve something it did not check.
"""

from __future__ import annotations

import math
from typing import Any

MAX_TEXT = 200
MAX_LINKS = 256
MAX_EVENTS = 20  # a peer's own (local) events sent with its figures

FIGURE_NUMBERS = ("step", "loss", "acc", "test_loss", "samples_per_s", "consensus_dist", "uptime_s")
FIGURE_TEXTS = ("peer_id", "name", "addr", "state", "device", "byzantine", "faults", "error")
EXCHANGE_NUMBERS = ("rounds", "applied", "served", "rejected", "bytes_sent")
LINK_NUMBERS = ("rtt_ms", "mbit_s", "bytes_sent", "bytes_received", "exchanges", "exchange_s_ago")
LINK_TEXTS = ("addr", "peer_id")
EVENT_NUMBERS = ("seq", "t")
EVENT_TEXTS = ("kind", "peer", "text")


def number(value: Any) -> float | int | None:
    """A finite int or float as is; anything else (NaN, a string, a bool) None."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return value if math.isfinite(value) else None


def text(value: Any) -> str | None:
    return value[:MAX_TEXT] if isinstance(value, str) else None


def _pick(raw: Any, numbers: tuple[str, ...], texts: tuple[str, ...]) -> dict[str, Any]:
    if not isinstance(raw, dict):
        return {}
    out: dict[str, Any] = {k: number(raw.get(k)) for k in numbers}
    out.update({k: text(raw.get(k)) for k in texts})
    return out


def clean_figures(raw: Any) -> dict[str, Any] | None:
    """A peer's `self` figures, or None when it is not a map with a string `peer_id`."""
    out = _pick(raw, FIGURE_NUMBERS, FIGURE_TEXTS)
    if not out or out["peer_id"] is None:
        return None
    out["exchange"] = _pick(raw.get("exchange"), EXCHANGE_NUMBERS, ())
    links = raw.get("links")
    links = links[:MAX_LINKS] if isinstance(links, list) else []
    out["links"] = [_pick(ln, LINK_NUMBERS, LINK_TEXTS) for ln in links if isinstance(ln, dict)]
    return out


def clean_events(raw: Any) -> list[dict[str, Any]]:
    """A peer's local events: each with a numbered `seq`, a time and a text; others dropped."""
    if not isinstance(raw, list):
        return []
    events = [_pick(e, EVENT_NUMBERS, EVENT_TEXTS) for e in raw[-MAX_EVENTS:]]
    return [e for e in events if e["seq"] is not None and e["t"] is not None and e["text"]]
