"""The chaos run's plot: accuracy and loss per peer over time, fault events as labelled lines.

matplotlib is an optional extra (`pip install swarmnode[plot]`): `plot_available()` says whether
it imports, and `write_plot` raises `PlotUnavailable` without it so the caller can say so in one
line and still keep the JSON report.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from swarmnode.kernels.errors import SwarmnodeError

PLOT_NAME = "plot.png"


class PlotUnavailable(SwarmnodeError):
    """matplotlib is not installed."""


def plot_available() -> bool:
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return False
    return True


def write_plot(report: Mapping[str, Any], path: str | Path) -> Path:
    """Render `report` (the `report.json` dict) to a PNG at `path`."""
    plt = _pyplot()
    fig = build_figure(report)
    try:
        fig.tight_layout()
        path = Path(path)
        fig.savefig(path, dpi=90)
    finally:
        plt.close(fig)
    return path


def build_figure(report: Mapping[str, Any]) -> Any:
    """The matplotlib Figure of `report`: axes[0] accuracy, axes[1] loss (one line per peer
    with data, labelled by name), axes[2] the model distance when sampled. The caller closes it
    (`matplotlib.pyplot.close`); tests inspect its lines before anything is rasterised."""
    plt = _pyplot()
    with_dist = any(d.get("max") is not None for d in report.get("distances", []))
    rows = 3 if with_dist else 2
    fig, axes = plt.subplots(rows, 1, figsize=(10, 2.6 * rows + 0.8), sharex=True)
    try:
        acc_ax, loss_ax = axes[0], axes[1]
        for name, samples in report["samples"].items():
            honest = report["peers"].get(name, {}).get("honest", True)
            style = "-" if honest else ":"
            label = name if honest else f"{name} (byzantine)"
            _line(acc_ax, samples, "acc", 100.0, style, label)
            _line(loss_ax, samples, "loss", 1.0, style, label)
        if with_dist:
            d = [x for x in report["distances"] if x.get("max") is not None]
            axes[2].plot([x["t"] for x in d], [x["max"] for x in d], "k.-", lw=1)
            axes[2].set_ylabel("max model distance")
            axes[2].set_yscale("symlog", linthresh=1e-3)
        acc_ax.set_ylabel("test accuracy (%)")
        loss_ax.set_ylabel("train loss")
        axes[-1].set_xlabel("seconds since all peers were ready")
        _mark_events(axes, report.get("timeline", []))
        _mark_attacks(axes, report.get("hostile") or [])
        if acc_ax.get_legend_handles_labels()[0]:  # a run that failed early has no curve
            acc_ax.legend(loc="lower right", fontsize="small", ncol=2)
        verdict = report.get("result", "?").upper()
        acc_ax.set_title(f"{report['scenario']['name']}: {verdict}", loc="left")
    except BaseException:
        plt.close(fig)
        raise
    return fig


def _pyplot() -> Any:
    try:
        import matplotlib

        matplotlib.use("Agg")  # no display on a CI box; must precede pyplot
        import matplotlib.pyplot as plt
    except ImportError:
        raise PlotUnavailable(
            "matplotlib is not installed (pip install 'swarmnode[plot]'): no plot written"
        ) from None
    return plt


def _line(
    ax: Any, samples: list[dict[str, Any]], key: str, scale: float, style: str, label: str
) -> None:
    """One peer's curve; a missing sample (frozen, dead) leaves a gap rather than a bridge."""
    points = [
        (s["t"], s[key] * scale if s.get("ok") and s.get(key) is not None else math.nan)
        for s in samples
    ]
    if any(not math.isnan(y) for _, y in points):
        ax.plot(*zip(*points, strict=True), style, lw=1.2, label=label)


def _mark_events(axes: Any, timeline: list[dict[str, Any]]) -> None:
    for t, entries in _same_moment(timeline):
        kills = any(e.get("action") in ("kill", "died") for e in entries)
        color = "tab:red" if kills else "tab:gray"
        for ax in axes:
            ax.axvline(t, color=color, ls="--", lw=0.8, alpha=0.8)
        axes[0].annotate(
            ", ".join(e.get("label") or e.get("action", "") for e in entries),
            xy=(t, 1.0),
            xycoords=("data", "axes fraction"),
            rotation=90,
            va="top",
            ha="right",
            fontsize="x-small",
            color=color,
        )


def _mark_attacks(axes: Any, attacks: list[dict[str, Any]]) -> None:
    """A hostile actor's span, shaded: from its start to its end (its event's line marks the
    start and names it)."""
    for attack in attacks:
        for ax in axes:
            ax.axvspan(attack["start"], attack["end"], color="tab:orange", alpha=0.12, lw=0)


def _same_moment(
    timeline: list[dict[str, Any]], gap: float = 0.5
) -> list[tuple[float, list[dict[str, Any]]]]:
    """Events less than `gap` s apart share one line and one label (kill c, kill d at t=12
    would otherwise print on top of each other)."""
    groups: list[tuple[float, list[dict[str, Any]]]] = []
    for entry in sorted(timeline, key=lambda e: e["t"]):
        if groups and entry["t"] - groups[-1][1][-1]["t"] < gap:
            groups[-1][1].append(entry)
        else:
            groups.append((entry["t"], [entry]))
    return groups
