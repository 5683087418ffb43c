"""The results side of scripts/bench/learning/convergence.py: per-peer and per-run results, the
figures (final accuracy, time to the single peer's accuracy, bytes sent), the markdown table and the
plot of the worst honest peer's accuracy against wall time."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

LAST = 3  # evaluations averaged into a peer's final accuracy


@dataclass
class PeerResult:
    name: str
    evals: list[tuple[int, float]]  # (step, accuracy) from the log
    timeline: list[tuple[float, float]]  # (seconds since release, accuracy) from /v1/status
    summary: dict[str, Any]
    honest: bool = True

    @property
    def final(self) -> float:
        accs = [a for _, a in self.evals[-LAST:]]
        return float(np.mean(accs)) if accs else math.nan

    def time_to(self, target: float) -> float | None:
        return next((t for t, a in self.timeline if a >= target), None)

    def step_to(self, target: float) -> int | None:
        return next((s for s, a in self.evals if a >= target), None)


@dataclass
class RunResult:
    name: str
    partition: str
    peers: list[PeerResult] = field(default_factory=list)
    wall_s: float = 0.0
    note: str = ""

    @property
    def honest(self) -> list[PeerResult]:
        return [p for p in self.peers if p.honest]

    @property
    def worst(self) -> float:
        return min(p.final for p in self.honest)

    @property
    def mean(self) -> float:
        return float(np.mean([p.final for p in self.honest]))


def figures(results: list[RunResult]) -> list[dict[str, Any]]:
    """One row per run: accuracy, time to single - 1 point, bytes, exchange rate."""
    single = results[0]
    target = single.worst - 0.01
    single_step_s = single.wall_s / max(1, single.peers[0].summary.get("steps_this_run", 1))
    rows = []
    for r in results:
        times = [p.time_to(target) for p in r.honest]
        if r.name.startswith("ideal"):
            step = r.peers[0].step_to(target)
            times = [None if step is None else step * single_step_s]
        reached = [t for t in times if t is not None]
        steps = [p.step_to(target) for p in r.honest]
        rate = [p.summary.get("steps_per_exchange") for p in r.honest]
        rows.append({
            "run": r.name,
            "note": r.note,
            "worst": r.worst,
            "mean": r.mean,
            "worst_minus_single": r.worst - single.worst,
            "per_peer": [p.final for p in r.honest],
            # None when a peer never reached the target: then the slowest time is unknown
            "time_to_target_worst_s": max(reached) if len(reached) == len(times) else None,
            "time_to_target_first_s": min(reached) if reached else None,
            "peers_reaching_target": f"{len(reached)}/{len(times)}",
            # from the peers' logs: independent of the box's load
            "steps_to_target_worst": None if None in steps else max(steps),
            "wall_s": r.wall_s,
            "bytes_sent_per_peer": float(
                np.mean([p.summary.get("exchange_bytes_sent", 0) for p in r.honest])
            ),
            "steps_per_exchange": float(np.mean([x for x in rate if x])) if any(rate) else None,
        })  # fmt: skip
    single_time = rows[0]["time_to_target_worst_s"]
    for row in rows:
        t = row["time_to_target_worst_s"]
        row["time_vs_single"] = t / single_time if t is not None and single_time else None
    return rows


def markdown(partition: str, rows: list[dict[str, Any]], target: float) -> str:
    out = [f"\n### {partition} (target: single - 1 point = {target * 100:.1f}%)\n",
           "| run | worst / mean acc | worst - single | time to target (worst peer) | "
           "x single | steps to target (worst) | peers at target | MB sent / peer | "
           "steps / exchange |",
           "|---|---|---|---|---|---|---|---|---|"]  # fmt: skip
    for r in rows:
        t = r["time_to_target_worst_s"]
        x = r["time_vs_single"]
        spe = r["steps_per_exchange"]
        st = r["steps_to_target_worst"]
        name = r["run"] + (f" ({r['note']})" if r["note"] else "")
        out.append(
            f"| {name} | {r['worst'] * 100:.1f} / {r['mean'] * 100:.1f}% | "
            f"{r['worst_minus_single'] * 100:+.1f} | {'-' if t is None else f'{t:.1f} s'} | "
            f"{'-' if x is None else f'{x:.2f}'} | {'-' if st is None else st} | "
            f"{r['peers_reaching_target']} | "
            f"{r['bytes_sent_per_peer'] / 1e6:.1f} | {'-' if spe is None else f'{spe:.0f}'} |"
        )
    return "\n".join(out)


def worst_curve(peers: list[PeerResult]) -> list[tuple[float, float]]:
    """(t, the lowest of the peers' latest accuracies) once every peer has evaluated."""
    out = []
    for t in sorted({t for p in peers for t, _ in p.timeline}):
        latest = [next((a for tt, a in reversed(p.timeline) if tt <= t), None) for p in peers]
        if all(a is not None for a in latest):
            out.append((t, min(a for a in latest if a is not None)))
    return out


def plot(report: dict[str, Any], results: dict[str, list[RunResult]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    parts = list(results)
    fig, axes = plt.subplots(1, len(parts), figsize=(7 * len(parts), 5), squeeze=False)
    for ax, part in zip(axes[0], parts, strict=True):
        runs = results[part]
        single_step_s = runs[0].wall_s / max(1, runs[0].peers[0].summary.get("steps_this_run", 1))
        for r in runs:
            if r.name.startswith("ideal"):
                ev = r.peers[0].evals
                ax.plot([s * single_step_s for s, _ in ev], [a * 100 for _, a in ev], "--",
                        label=f"{r.name} (computed)")  # fmt: skip
                continue
            worst = worst_curve(r.honest)
            if worst:
                ax.plot([t for t, _ in worst], [a * 100 for _, a in worst], label=r.name)
        target = report["partitions"][part]["target"] * 100
        ax.axhline(target, color="grey", lw=0.8, ls=":", label="single - 1 pt")
        ax.set_title(f"{report['options']['data']} {report['options']['model']}, {part}")
        ax.set_xlabel("wall time since release (s)")
        ax.set_ylabel("worst honest peer's test accuracy (%)")
        ax.set_ylim(max(0, target - 40), min(100, target + 12))
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
