"""The chaos run's report: `report.json` (schema below), its check, and the final text table.

    {"schema_version": 1,
     "scenario": {"name", "description", "source", "duration", "sample_every", "params_every"},
     "settings": {"command": [...], "node": {...}, "peers": {NAME: {"index", "late", "flags"}},
                  "events": [scheduled events], "assertions": [{"kind", "params", "must_fail"}]},
     "started_at": ISO-8601 UTC, "result": "pass"|"fail"|"error"|"interrupted",
     "passed": bool, "error": str|null, "notes": [str],
     "durations": {"startup_s", "timeline_s", "shutdown_s", "total_s"},
     "timeline": [{"t", "index", "action", "peer", "label", "ok", ...}],   # executed, actual times
     "peers": {NAME: {"peer_ids", "addrs", "pids", "exit_codes", "logs", "final_state", "honest"}},
     "samples": {NAME: [{"t", "ok", "step", "acc", "loss", ...} | {"t", "ok": false, "why"}]},
     "distances": [{"t", "max", "n", "missing"}],
     "assertions": [{"kind", "description", "measured", "threshold", "op", "status", "ok", ...}],
     "plot": "plot.png"|null}

Times are seconds after t = 0 (every initial peer ready). Non-finite numbers are written as null
(JSON has no inf): an assertion's `status` still says what happened.
"""

from __future__ import annotations

import dataclasses
import datetime
import json
import math
import os
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fault.assertions import Result, RunRecord

if TYPE_CHECKING:
    from fault.runner import ChaosRunner

SCHEMA_VERSION = 1
REPORT_NAME = "report.json"
TOP_KEYS = {
    "schema_version": int,
    "scenario": dict,
    "settings": dict,
    "started_at": str,
    "result": str,
    "passed": bool,
    "notes": list,
    "durations": dict,
    "timeline": list,
    "peers": dict,
    "samples": dict,
    "distances": list,
    "assertions": list,
}
RESULTS = ("pass", "fail", "error", "interrupted")


def build_report(
    runner: ChaosRunner,
    record: RunRecord,
    results: list[Result],
    outcome: str,
    started_at: float,
    durations: Mapping[str, float],
) -> dict[str, Any]:
    """Everything a run observed, as a JSON-ready dict. `outcome`: completed/error/interrupted."""
    sc = runner.scenario
    if outcome == "completed":
        result = "pass" if all(r.ok for r in results) else "fail"
    else:
        result = outcome
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
            "command": runner.command,
            "node": sc.node,
            "peers": {
                p.name: {"index": p.index, "late": p.late, "flags": sc.flags_for(p.name)}
                for p in sc.peers
            },
            "events": [dataclasses.asdict(e) for e in sc.events],
            "assertions": [dataclasses.asdict(a) for a in sc.assertions],
        },
        "started_at": datetime.datetime.fromtimestamp(
            started_at, datetime.timezone.utc
        ).isoformat(),
        "result": result,
        "passed": result == "pass",
        "error": runner.error,
        "notes": list(runner.notes),
        "durations": {k: round(v, 3) for k, v in durations.items()},
        "timeline": record.timeline,
        "peers": {
            name: {
                "peer_ids": p.peer_ids,
                "addrs": p.addrs,
                "pids": p.pids,
                "exit_codes": p.exit_codes,
                "logs": [_relative(log, runner.report_dir) for log in p.logs],
                "argv": p.argv,
                "final_state": record.final_state.get(name),
                "honest": name in runner.honest,
            }
            for name, p in runner.peers.items()
        },
        "samples": record.samples,
        "distances": record.distances,
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
    if problems:
        return problems
    if report["result"] not in RESULTS:
        problems.append(f"result {report['result']!r} not in {RESULTS}")
    if report["passed"] != (report["result"] == "pass"):
        problems.append("'passed' disagrees with 'result'")
    for entry in report["timeline"]:
        if not {"t", "action", "label", "ok"} <= entry.keys():
            problems.append(f"timeline entry lacks keys: {entry}")
    times = [e["t"] for e in report["timeline"]]
    if times != sorted(times):
        problems.append("timeline is not in time order")
    for name, samples in report["samples"].items():
        if name not in report["peers"]:
            problems.append(f"samples of unknown peer {name!r}")
        for s in samples:
            if "t" not in s or "ok" not in s or (not s["ok"] and "why" not in s):
                problems.append(f"bad sample of {name}: {s}")
                break
    for a in report["assertions"]:
        if not {"kind", "measured", "threshold", "status", "ok"} <= a.keys():
            problems.append(f"assertion lacks keys: {a}")
    return problems


def final_table(report: Mapping[str, Any]) -> str:
    """The per-peer table and the assertion verdicts printed at the end of a run."""
    header = ["peer", "peer id", "state", "step", "acc", "loss", "rounds", "starts"]
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
    verdict = report["result"].upper()
    if report.get("error"):
        verdict += f": {report['error']}"
    lines.append(f"result: {verdict}")
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
