"""The chaos run's report: `report.json` (schema below), its check, and the final text table.

    {"schema_version": 1,
     "scenario": {"name", "description", "source", "duration", "sample_every", "params_every"},
     "settings": {"command": [...], "node": {...}, "peers": {NAME: {"index", "late", "flags"}},
                  "events": [scheduled events], "assertions": [{"kind", "params", "must_fail"}],
                  "authenticated": bool (the runner signed with a swarm secret; never the secret)},
     "started_at": ISO-8601 UTC, "result": "pass"|"fail"|"error"|"interrupted",
     "passed": bool, "error": str|null, "reasons": [str], "notes": [str],
     "durations": {"startup_s", "timeline_s", "shutdown_s", "total_s"},
     "timeline": [{"t", "index", "action", "peer", "label", "ok", ...}],   # executed, actual times
     "peers": {NAME: {"peer_ids", "addrs", "pids", "exit_codes", "logs", "argv", "final_state",
                      "honest"}},
     "samples": {NAME: [{"t", "ok", "step", "acc", "loss", ...} | {"t", "ok": false, "why"}]},
     "distances": [{"t", "max", "n", "missing"[, "byzantine": {NAME: {"nearest", "from_mean",
                    "honest_from_mean", "std_shift"} | null}]}],   # see probe.relative_position
     "hostile": [{"kind", "peer", "id", "start", "end", "outcome", "accepted", ...}],  # attackers
     "control": {"result", "report": "control/report.json"} | null,  # the control swarm
     "assertions": [{"kind", "description", "measured", "threshold", "op", "status", "ok",
                     "detail", "per_peer", "facts", ...}],
     "plot": "plot.png"|null}

The verdict (`result`): "pass" only when the timeline ran to the end, every event was carried
out, no peer died without being told to, and every assertion is ok. An event the runner could not
carry out (a partition whose admin request failed, a restart that never got ready) makes it
"error" (`error` says which: the run did not test what the scenario describes); a peer that died
on its own or a failed assertion makes it "fail". `reasons` lists every cause, one line each.

Times are seconds after t = 0 (every initial peer ready). Non-finite numbers are written as null
(JSON has no inf): an assertion's `status` still says what happened.
"""

from __future__ import annotations

import dataclasses
import datetime
import json
import math
import os
from collections.abc import Collection, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from swarmnode.fault.chaos.record import Result, RunRecord

if TYPE_CHECKING:
    from swarmnode.fault.chaos.scenario import Scenario

SCHEMA_VERSION = 1
REPORT_NAME = "report.json"
TOP_KEYS = {
    "schema_version": int,
    "scenario": dict,
    "settings": dict,
    "started_at": str,
    "result": str,
    "passed": bool,
    "reasons": list,
    "notes": list,
    "durations": dict,
    "timeline": list,
    "peers": dict,
    "samples": dict,
    "distances": list,
    "assertions": list,
}
RESULTS = ("pass", "fail", "error", "interrupted")
PEER_KEYS = {
    "peer_ids": list,
    "addrs": list,
    "pids": list,
    "exit_codes": list,
    "logs": list,
    "argv": list,
    "final_state": (str, type(None)),
    "honest": bool,
}
ASSERTION_KEYS = {"kind", "description", "measured", "threshold", "op", "status", "ok"}


class PeerHistory(Protocol):
    """One scenario peer across its (re)starts, as the report lists it."""

    peer_ids: list[str]
    addrs: list[str]
    pids: list[int]
    exit_codes: list[int | None]
    logs: list[str]
    argv: list[str]


@dataclasses.dataclass(frozen=True)
class RunContext:
    """What the report needs of a run beyond its `RunRecord` (never the secret itself)."""

    scenario: Scenario
    command: Sequence[str]
    report_dir: Path
    peers: Mapping[str, PeerHistory]
    honest: Collection[str]
    notes: Sequence[str]
    error: str | None
    authenticated: bool  # the runner signed its requests with a swarm secret


def verdict(
    outcome: str, results: list[Result], timeline: list[dict[str, Any]], error: str | None
) -> tuple[str, str | None, list[str]]:
    """(result, error, reasons) of a run. `outcome`: completed/error/interrupted."""
    failed = [e for e in timeline if not e.get("ok", True) and e.get("action") != "died"]
    died = [e for e in timeline if e.get("action") == "died"]
    reasons = [] if error is None else [error]
    reasons += [f"t={e['t']:.1f}s '{e.get('label')}' failed: {e.get('error')}" for e in failed]
    reasons += [
        f"t={e['t']:.1f}s peer {e.get('peer')} died unexpectedly (exit code {e.get('exit_code')})"
        for e in died
    ]
    reasons += [f"assertion {r.kind}: {r.status} ({r.description})" for r in results if not r.ok]
    if outcome != "completed":
        return outcome, error, reasons
    if failed:  # the scenario was not carried out as written: its assertions prove nothing
        return "error", error or reasons[0], reasons
    return ("fail" if reasons else "pass"), error, reasons


def build_report(
    run: RunContext,
    record: RunRecord,
    results: list[Result],
    outcome: str,
    started_at: float,
    durations: Mapping[str, float],
) -> dict[str, Any]:
    """Everything a run observed, as a JSON-ready dict. `outcome`: completed/error/interrupted."""
    sc = run.scenario
    result, error, reasons = verdict(outcome, results, record.timeline, run.error)
    return {
        "schema_version": SCHEMA_VERSION,
        "scenario": {
            "name": sc.name,
            "description": sc.description,
            "source": sc.source,
            "duration": sc.duration,
            "sample_every": sc.sample_every,
            "params_every": sc.params_every,
        },
        "settings": {
            "command": list(run.command),
            "node": sc.node,
            "peers": {
                p.name: {"index": p.index, "late": p.late, "flags": sc.flags_for(p.name)}
                for p in sc.peers
            },
            "events": [dataclasses.asdict(e) for e in sc.events],
            "assertions": [dataclasses.asdict(a) for a in sc.assertions],
            "authenticated": run.authenticated,
        },
        "started_at": datetime.datetime.fromtimestamp(
            started_at, datetime.timezone.utc
        ).isoformat(),
        "result": result,
        "passed": result == "pass",
        "error": error,
        "reasons": reasons,
        "notes": list(run.notes),
        "durations": {k: round(v, 3) for k, v in durations.items()},
        "timeline": record.timeline,
        "peers": {
            name: {
                "peer_ids": p.peer_ids,
                "addrs": p.addrs,
                "pids": p.pids,
                "exit_codes": p.exit_codes,
                "logs": [_relative(log, run.report_dir) for log in p.logs],
                "argv": p.argv,
                "final_state": record.final_state.get(name),
                "honest": name in run.honest,
            }
            for name, p in run.peers.items()
        },
        "samples": record.samples,
        "distances": record.distances,
        "hostile": record.hostile,
        # the control swarm run alongside (swarmnode.fault.chaos.control): its own report there
        "control": None
        if record.control_result is None
        else {"result": record.control_result, "report": "control/report.json"},
        "assertions": [r.to_json() for r in results],
        "plot": None,
    }


def write_report(report_dir: str | Path, report: Mapping[str, Any]) -> Path:
    """Write `report.json` atomically (temp file + rename); return its path."""
    path = Path(report_dir) / REPORT_NAME
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(_finite(report), indent=1, allow_nan=False) + "\n")
    os.replace(tmp, path)
    return path


def load_report(path: str | Path) -> dict[str, Any]:
    return json.loads(Path(path).read_text())


def check_report(report: Mapping[str, Any]) -> list[str]:
    """Problems with a report's shape (empty when it follows the schema above)."""
    problems = [
        f"'{key}' missing or not {kind.__name__}"
        for key, kind in TOP_KEYS.items()
        if not isinstance(report.get(key), kind)
    ]
    for key in ("error", "plot"):  # required, but null is a value
        if key not in report:
            problems.append(f"'{key}' missing")
    if problems:
        return problems
    problems += _check_verdict(report)
    problems += _check_timeline(report["timeline"])
    problems += _check_peers(report["peers"])
    for name, samples in report["samples"].items():
        if name not in report["peers"]:
            problems.append(f"samples of unknown peer {name!r}")
        for s in samples:
            if "t" not in s or "ok" not in s or (not s["ok"] and "why" not in s):
                problems.append(f"bad sample of {name}: {s}")
                break
    for a in report["assertions"]:
        if not ASSERTION_KEYS <= a.keys() or not isinstance(a.get("ok"), bool):
            problems.append(f"assertion lacks keys: {a}")
    return problems


def _check_verdict(report: Mapping[str, Any]) -> list[str]:
    problems = []
    result, error, plot = report["result"], report["error"], report["plot"]
    if result not in RESULTS:
        problems.append(f"result {result!r} not in {RESULTS}")
    if report["passed"] != (result == "pass"):
        problems.append("'passed' disagrees with 'result'")
    if (result == "error") != (isinstance(error, str) and bool(error)):
        problems.append(f"'error' must be a message exactly when result is 'error', got {error!r}")
    if error is not None and not isinstance(error, str):
        problems.append(f"'error' must be a string or null, got {error!r}")
    if result == "pass" and report["reasons"]:
        problems.append("a passed run lists reasons to fail")
    if result in ("fail", "error") and not report["reasons"]:
        problems.append(f"result {result!r} without any reason")
    if not all(isinstance(r, str) for r in report["reasons"]):
        problems.append("'reasons' must be strings")
    if plot is not None and not (isinstance(plot, str) and plot.endswith(".png")):
        problems.append(f"'plot' must be a .png file name or null, got {plot!r}")
    return problems


def _check_timeline(timeline: list[Any]) -> list[str]:
    problems = []
    for entry in timeline:
        if not isinstance(entry, dict) or not {"t", "action", "label", "ok"} <= entry.keys():
            problems.append(f"timeline entry lacks keys: {entry}")
            return problems
        if not entry["ok"] and not ({"error"} & entry.keys() or entry["action"] == "died"):
            problems.append(f"failed timeline entry without an error: {entry}")
    times = [e["t"] for e in timeline]
    if times != sorted(times):
        problems.append("timeline is not in time order")
    return problems


def _check_peers(peers: Mapping[str, Any]) -> list[str]:
    problems = []
    for name, info in peers.items():
        if not isinstance(info, dict):
            problems.append(f"peer {name!r} is not an object")
            continue
        for key, kind in PEER_KEYS.items():
            if key not in info or not isinstance(info[key], kind):
                problems.append(f"peer {name!r}: '{key}' missing or of the wrong type")
        starts = [len(info.get(k) or []) for k in ("pids", "exit_codes", "logs")]
        if len(set(starts)) > 1:
            problems.append(f"peer {name!r}: pids, exit_codes and logs differ in length {starts}")
    return problems


def final_table(report: Mapping[str, Any]) -> str:
    """The per-peer table and the assertion verdicts printed at the end of a run."""
    header = ["peer", "peer id", "state", "step", "acc", "train loss", "rounds", "starts"]
    rows = []
    for name, info in report["peers"].items():
        last = next((s for s in reversed(report["samples"].get(name, [])) if s.get("ok")), {})
        rows.append(
            [
                name + ("" if info.get("honest", True) else " (byz)"),
                (info["peer_ids"][-1] if info["peer_ids"] else "-")[:12],
                info.get("final_state") or "-",
                _cell(last.get("step")),
                "-" if last.get("acc") is None else f"{100 * last['acc']:.1f}%",
                "-" if last.get("loss") is None else f"{last['loss']:.4f}",
                _cell(last.get("rounds")),
                str(len(info["pids"])),
            ]
        )
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    lines = [
        "  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)) for row in [header, *rows]
    ]
    lines.insert(1, "  ".join("-" * w for w in widths))
    for a in report["assertions"]:
        measured = "-" if a["measured"] is None else f"{a['measured']:.4g}"
        lines.append(
            f"[{a['status']}] {a['kind']}: {a['description']} (measured {measured}, "
            f"threshold {a['op']} {a['threshold']:g})"
        )
        if a.get("detail") and not a["ok"]:
            lines.append(f"    {a['detail']}")
    result = report["result"].upper()
    if report.get("error"):
        result += f": {report['error']}"
    lines.append(f"result: {result}")
    # The other causes (a peer that died, a failed event) would otherwise go unsaid.
    lines += [f"  - {r}" for r in report.get("reasons", []) if r != report.get("error")]
    return "\n".join(lines)


def _cell(value: Any) -> str:
    return "-" if value is None else str(value)


def _relative(path: str, root: Path) -> str:
    try:
        return str(Path(path).relative_to(root))
    except ValueError:
        return path


def _finite(obj: Any) -> Any:
    """A copy with inf/nan floats replaced by None (JSON has no spelling for them)."""
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, Mapping):
        return {str(k): _finite(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_finite(v) for v in obj]
    return obj
