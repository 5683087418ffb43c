"""report.json and the plot, on synthetic data; the verdict."""

from __future__ import annotations

import json
import sys

import numpy as np
import pytest
from swarmnode.fault.chaos.assertions import Result
from swarmnode.fault.chaos.plot import PlotUnavailable, build_figure, write_plot
from swarmnode.fault.chaos.report import check_report, verdict, write_report

# --- report and plot on synthetic data ---------------------------------------------------------


def _synthetic_report() -> dict:
    t = np.arange(0, 20, 0.5)
    samples = {}
    for i, name in enumerate("abc"):
        acc = 1 - 0.9 * np.exp(-(t + 3 * i) / 5)
        samples[name] = [
            {
                "t": float(x),
                "ok": True,
                "acc": float(a),
                "loss": float(-np.log(a)),
                "step": int(x * 10),
            }
            if not (name == "b" and 5 <= x <= 8)
            else {"t": float(x), "ok": False, "why": "frozen"}
            for x, a in zip(t, acc, strict=True)
        ]
    return {
        "schema_version": 1,
        "scenario": {"name": "synthetic"},
        "settings": {},
        "started_at": "2024-01-01T00:00:00+00:00",
        "result": "pass",
        "passed": True,
        "error": None,
        "reasons": [],
        "notes": [],
        "durations": {},
        "timeline": [
            {
                "t": 5.0,
                "index": 0,
                "action": "freeze",
                "peer": "b",
                "label": "freeze b",
                "ok": True,
            },
            {"t": 12.0, "index": 1, "action": "kill", "peer": "c", "label": "kill c", "ok": True},
        ],
        "peers": {
            n: {
                "peer_ids": [n],
                "addrs": ["127.0.0.1:1"],
                "pids": [1],
                "exit_codes": [None],
                "logs": [f"peers/{n}/log-0.txt"],
                "argv": ["swarmnode", "start"],
                "final_state": "running",
                "honest": n != "c",
            }
            for n in "abc"
        },
        "samples": samples,
        "distances": [{"t": float(x), "max": float(np.exp(-x / 4)), "n": 3} for x in t[::4]],
        "assertions": [],
        "plot": None,
    }


@pytest.mark.parametrize("with_distances", [False, True])
def test_plot_draws_every_peers_curves(tmp_path, with_distances):
    """Each peer's accuracy and loss curve is in the figure with its data, and each one's colour
    shows in the PNG: a lone red kill marker on a white canvas would not pass."""
    pytest.importorskip("matplotlib")
    import matplotlib.colors as mcolors
    import matplotlib.image as mimage
    import matplotlib.pyplot as plt

    report = _synthetic_report()
    if not with_distances:
        report["distances"] = []
    fig = build_figure(report)
    try:
        acc_ax, loss_ax = fig.axes[0], fig.axes[1]
        assert len(fig.axes) == (3 if with_distances else 2)
        for ax in (acc_ax, loss_ax):
            curves = {
                ln.get_label(): ln for ln in ax.get_lines() if not ln.get_label().startswith("_")
            }
            assert set(curves) == {"a", "b", "c (byzantine)"}
            for label, line in curves.items():
                y = np.asarray(line.get_ydata(), dtype=float)
                assert np.isfinite(y).sum() >= 20, label  # 40 samples, b misses 7
            assert curves["c (byzantine)"].get_linestyle() == ":"
        colours = {
            mcolors.to_hex(ln.get_color()) for ln in acc_ax.get_lines() if ln.get_label()[0] != "_"
        }
        assert len(colours) == 3  # one distinct colour per peer
        acc = np.asarray(curves_of(acc_ax)["a"].get_ydata(), dtype=float)
        assert acc[-1] > acc[0]  # the data, not a placeholder: a's accuracy rises
    finally:
        plt.close(fig)

    pixels = mimage.imread(write_plot(report, tmp_path / "plot.png"))[..., :3]
    for colour in colours:  # every peer's colour covers a visible stretch of the image
        rgb = np.asarray(mcolors.to_rgb(colour))
        near = np.all(np.abs(pixels - rgb) < 0.08, axis=-1)
        assert near.sum() > 100, f"{colour}: {near.sum()} pixels"  # the dotted one has ~170


def curves_of(ax) -> dict:
    return {ln.get_label(): ln for ln in ax.get_lines() if not ln.get_label().startswith("_")}


def test_plot_without_matplotlib_says_so(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    with pytest.raises(PlotUnavailable, match="matplotlib is not installed"):
        write_plot(_synthetic_report(), tmp_path / "plot.png")
    assert not (tmp_path / "plot.png").exists()


def test_report_schema_check_and_json_without_infinities(tmp_path):
    report = _synthetic_report()
    report["assertions"] = [
        {
            "kind": "membership",
            "description": "d",
            "measured": float("inf"),
            "threshold": 5.0,
            "op": "<=",
            "status": "fail",
            "ok": False,
        }
    ]
    report.update(result="fail", passed=False, reasons=["assertion membership: fail (d)"])
    assert check_report(report) == []
    path = write_report(tmp_path, report)
    data = json.loads(path.read_text())  # strict JSON: no Infinity token
    assert data["assertions"][0]["measured"] is None
    assert "Infinity" not in path.read_text()

    broken = dict(report, passed=True, timeline=list(reversed(report["timeline"])))
    problems = check_report(broken)
    assert any("disagrees" in p for p in problems) and any("time order" in p for p in problems)
    del broken["samples"]
    assert check_report(broken) == ["'samples' missing or not dict"]


def _peer_with(**changes):
    report = _synthetic_report()
    report["peers"]["a"].update(changes)
    return report


@pytest.mark.parametrize(
    "change, fragment",
    [
        (lambda r: r.pop("error"), "'error' missing"),
        (lambda r: r.pop("plot"), "'plot' missing"),
        (lambda r: r.pop("reasons"), "'reasons' missing"),
        (lambda r: r.update(error="boom"), "'error' must be a message exactly when"),
        (lambda r: r.update(result="error", passed=False, reasons=["x"]), "'error' must be"),
        (
            lambda r: r.update(error=3, result="error", passed=False, reasons=["x"]),
            "string or null",
        ),
        (lambda r: r.update(reasons=["peer b died"]), "a passed run lists reasons"),
        (lambda r: r.update(result="fail", passed=False), "without any reason"),
        (lambda r: r.update(plot=7), "'plot' must be a .png"),
        (lambda r: r.update(plot="plot.svg"), "'plot' must be a .png"),
        (lambda r: r["peers"]["a"].pop("pids"), "peer 'a': 'pids' missing"),
        (lambda r: r["peers"]["a"].update(honest="yes"), "peer 'a': 'honest'"),
        (lambda r: r["peers"]["a"].update(final_state=1), "peer 'a': 'final_state'"),
        (lambda r: r["peers"]["a"].update(logs=[]), "differ in length"),
        (lambda r: r["peers"].update(z=[]), "peer 'z' is not an object"),
        (lambda r: r["timeline"][0].update(ok=False), "failed timeline entry without an error"),
        (lambda r: r["samples"].update(q=[]), "samples of unknown peer 'q'"),
        (lambda r: r["assertions"].append({"kind": "x", "ok": True}), "assertion lacks keys"),
    ],
)
def test_report_schema_check_covers_error_plot_reasons_and_peers(change, fragment):
    report = _synthetic_report()
    assert check_report(report) == []
    change(report)
    problems = check_report(report)
    assert any(fragment in p for p in problems), problems


def _res(ok: bool) -> Result:
    return Result("final_accuracy", "acc >= 0.9", 0.95 if ok else 0.5, 0.9, ">=", False)


def test_verdict_fails_on_a_failed_event_a_death_or_an_assertion():
    ok_event = {"t": 1.0, "action": "kill", "label": "kill c", "ok": True}
    bad_event = {
        "t": 2.0,
        "action": "partition",
        "label": "split",
        "ok": False,
        "error": "HTTP 401",
    }
    died = {"t": 3.0, "action": "died", "peer": "b", "label": "b died", "ok": False, "exit_code": 3}

    assert verdict("completed", [_res(True)], [ok_event], None) == ("pass", None, [])
    result, error, reasons = verdict("completed", [_res(True)], [ok_event, bad_event], None)
    assert result == "error" and "'split' failed: HTTP 401" in error and reasons == [error]
    result, error, reasons = verdict("completed", [_res(True)], [died], None)
    assert result == "fail" and error is None
    assert reasons == ["t=3.0s peer b died unexpectedly (exit code 3)"]
    result, error, reasons = verdict("completed", [_res(False)], [], None)
    assert result == "fail" and reasons == ["assertion final_accuracy: fail (acc >= 0.9)"]
    result, error, reasons = verdict("interrupted", [], [died], None)
    assert result == "interrupted" and error is None and len(reasons) == 1
    assert verdict("error", [], [], "peer a not ready")[:2] == ("error", "peer a not ready")
