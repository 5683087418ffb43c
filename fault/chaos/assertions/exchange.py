"""The exchange assertions: exchange_progress, max_wait.

Each reads the peers' exchange round counters and longest round times (see
swarmnode.fault.chaos.assertions for the kinds' keys and defaults)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from swarmnode.fault.chaos.record import (
    Result,
    RunRecord,
    ScenarioView,
    exchange_timeout,
    honest_peers,
    longest_stall,
    missing_note,
)


def exchange_progress(scenario: ScenarioView, record: RunRecord, p: Mapping[str, Any]) -> Result:
    default = [n for n in honest_peers(scenario) if n not in _stragglers(scenario)]
    per = {name: longest_stall(record.samples.get(name, [])) for name in p["peers"] or default}
    text = f"no honest peer's exchange round counter stalls longer than {p['max_stall']:g} s"
    return Result.over_peers("exchange_progress", text, per, max, p["max_stall"], "<=")


def max_wait(scenario: ScenarioView, record: RunRecord, p: Mapping[str, Any]) -> Result:
    disturbed = {e.peer for e in scenario.events if e.action in ("freeze", "kill", "terminate")}
    disturbed |= _stragglers(scenario)
    default = [n for n in honest_peers(scenario) if n not in disturbed]
    per: dict[str, Any] = {}
    for name in p["peers"] or default:
        waits = [
            float(s["max_round_s"])
            for s in record.samples.get(name, [])
            if s.get("ok") and s.get("max_round_s") is not None
        ]
        per[name] = max(waits) if waits else None
    known = [v for v in per.values() if v is not None]
    measured = max(known) if known and len(known) == len(per) else None
    timeout = exchange_timeout(scenario)
    return Result(
        "max_wait",
        f"no honest peer's exchange round took longer than one exchange timeout "
        f"({timeout:g} s) + {p['allowance']:g} s of its own encode/decode work",
        measured,
        timeout + p["allowance"],
        "<=",
        False,
        detail=missing_note(per, "exchange"),
        per_peer=per,
        facts={
            "exchange_timeout": timeout,
            "allowance": p["allowance"],
            "bound": timeout + p["allowance"],
            "measured": measured,
            "over_timeout": None if measured is None else measured - timeout,
        },
    )


def _stragglers(scenario: ScenarioView) -> set[str]:
    """Peers slowed down beyond the rest: by a `slowdown` event, or a per-peer `slowdown` above
    the [node] one (a [node] slowdown paces every peer alike and makes nobody a straggler)."""
    base = float(scenario.node.get("slowdown", 1.0))
    slowed = {e.peer for e in scenario.events if e.action == "slowdown" and e.peer}
    slowed |= {
        p.name
        for p in scenario.peers
        if float(scenario.flags_for(p.name).get("slowdown", 1.0)) > base
    }
    return slowed
