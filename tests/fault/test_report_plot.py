"""The chaos runner end to end against fake peer processes, the report's schema, and the plot."""

from __future__ import annotations

import asyncio
import io
import json
import os
import signal
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from fault.plot import PlotUnavailable, write_plot
from fault.report import check_report, load_report, write_report
from fault.runner import ChaosError, ChaosRunner
from fault.scenario import parse_scenario_text
from node.cmd_chaos import run_scenario

FAKE = [sys.executable, str(Path(__file__).with_name("fake_peer.py"))]

SCENARIO = """
[scenario]
name = "fake-e2e"
duration = 8
sample_every = 0.5
params_every = 1
stop_grace = 3

[node]
model = "mlp:64"
steps = 0

[[peer]]
name = "a"
[[peer]]
name = "b"
[[peer]]
name = "c"

[[event]]
at = 1
action = "freeze"
peer = "b"
[[event]]
at = 1.5
action = "kill"
peer = "c"
id = "kill-c"
[[event]]
at = 2
action = "fault"
peer = "a"
spec = "drop=0.1,delay=50ms"
[[event]]
at = 3
action = "thaw"
peer = "b"
[[event]]
at = 3.5
action = "byzantine"
peer = "b"
kind = "gaussian"
[[event]]
at = 5.5
action = "restart"
peer = "c"

[[assert]]
kind = "membership"
after = "kill-c"
within = 6
[[assert]]
kind = "final_accuracy"
min = 0.999
must_fail = true
"""


def _gone(pid: int) -> bool:
    """True when `pid` is no longer one of our fake peers (reaped, or reused by another)."""
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return True
    return b"fake_peer" not in cmdline


def _poll(cond, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


async def _apoll(cond, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.05)


@pytest.mark.timeout(90)
def test_runner_end_to_end_with_fake_peers(tmp_path):
    scenario = parse_scenario_text(SCENARIO, source="fake.toml")
    out = io.StringIO()
    code, _ = run_scenario(scenario, tmp_path / "run", command=FAKE, out=out)
    text = out.getvalue()
    report = load_report(tmp_path / "run" / "report.json")
    assert check_report(report) == []
    assert code == 0, text
    assert report["result"] == "pass" and report["passed"]

    # the timeline ran in order, on time, and every event worked
    timeline = [e for e in report["timeline"] if e["index"] is not None]
    assert [e["action"] for e in timeline] == [
        "freeze",
        "kill",
        "fault",
        "thaw",
        "byzantine",
        "restart",
    ]
    assert all(e["ok"] for e in timeline), timeline
    for e in timeline:
        assert e["scheduled"] - 0.01 <= e["t"] <= e["scheduled"] + 2.0
    assert not [e for e in report["timeline"] if e["action"] == "died"]

    # frozen and dead peers give missing samples, never a stuck loop
    b = report["samples"]["b"]
    frozen = [s for s in b if 1.2 <= s["t"] <= 2.8]
    assert frozen and all(not s["ok"] and s["why"] == "frozen" for s in frozen)
    c = report["samples"]["c"]
    assert any(not s["ok"] and s["why"] == "down" for s in c if 1.6 <= s["t"] <= 3.9)
    times = [s["t"] for s in report["samples"]["a"]]
    assert times == sorted(times) and times[-1] >= scenario.duration
    assert len(times) >= scenario.duration / scenario.sample_every * 0.6

    # the admin requests reached the peers
    assert any("drop" in (s.get("faults") or "") for s in report["samples"]["a"] if s["ok"])
    assert any(s.get("byzantine") == "gaussian" for s in b if s["ok"] and s["t"] > 3.6)

    # the restart kept the peer id (same checkpoint dir), on a new process and port
    c_info = report["peers"]["c"]
    assert len(c_info["pids"]) == 2 and len(set(c_info["peer_ids"])) == 1
    assert c_info["final_state"] == "running" and c_info["exit_codes"][0] == -signal.SIGKILL

    # model distances between the honest peers that answered (a, and c while it runs)
    pairs = [d for d in report["distances"] if d["n"] >= 2]
    assert pairs and all(d["max"] is not None and d["max"] >= 0 for d in pairs)

    results = {a["kind"]: a for a in report["assertions"]}
    assert results["membership"]["status"] == "pass"
    assert results["final_accuracy"]["status"] == "failed as expected"
    assert "[failed as expected] final_accuracy" in text and "result: PASS" in text

    # the progress lines, the plot, and no process left behind
    assert text.count("t=") >= 10
    assert report["plot"] == "plot.png" and (tmp_path / "run" / "plot.png").stat().st_size > 0
    pids = [pid for info in report["peers"].values() for pid in info["pids"]]
    assert len(pids) == 4
    assert all(_gone(pid) for pid in pids)


@pytest.mark.timeout(60)
async def test_cancel_mid_run_stops_everything_and_records_a_death(tmp_path):
    text = SCENARIO.replace("duration = 8", "duration = 60").split("[[event]]")[0]
    scenario = parse_scenario_text(text, source="fake.toml")
    runner = ChaosRunner(scenario, tmp_path, command=FAKE, out=io.StringIO(), quiet=True)
    task = asyncio.create_task(runner.run())
    await _apoll(lambda: all(runner.samples[n] for n in "abc"), 30, "first samples")
    victim = runner.peers["c"].proc.pid
    os.kill(victim, signal.SIGKILL)  # not the runner's doing: it must be recorded
    await _apoll(lambda: any(e["action"] == "died" for e in runner.timeline), 10, "the death")
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    report = load_report(tmp_path / "report.json")
    assert check_report(report) == []
    assert report["result"] == "interrupted" and not report["passed"]
    died = [e for e in report["timeline"] if e["action"] == "died"]
    assert died[0]["peer"] == "c" and died[0]["exit_code"] == -signal.SIGKILL
    assert report["peers"]["c"]["final_state"] == "down"
    assert all(_gone(p.proc.pid) for p in runner.peers.values())


def test_peer_that_cannot_start_fails_the_run_cleanly(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # and no matplotlib: JSON still written
    scenario = parse_scenario_text(SCENARIO, source="fake.toml")
    command = [sys.executable, "-c", "import sys; print('no luck'); sys.exit(3)"]
    out = io.StringIO()
    code, _ = run_scenario(scenario, tmp_path, command=command, out=out)
    assert code == 1
    report = load_report(tmp_path / "report.json")
    assert check_report(report) == []
    assert report["result"] == "error" and "exited with code 3" in report["error"]
    assert "no luck" in report["error"]
    assert "matplotlib is not installed" in out.getvalue()
    assert report["plot"] is None
    with pytest.raises(ChaosError, match="already holds a chaos run"):  # stale checkpoints
        run_scenario(scenario, tmp_path, command=command, out=out)


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
        "peers": {n: {"pids": [1], "peer_ids": [n], "honest": n != "c"} for n in "abc"},
        "samples": samples,
        "distances": [{"t": float(x), "max": float(np.exp(-x / 4)), "n": 3} for x in t[::4]],
        "assertions": [],
        "plot": None,
    }


@pytest.mark.parametrize("with_distances", [False, True])
def test_plot_is_written_and_not_blank(tmp_path, with_distances):
    image = pytest.importorskip("matplotlib.image")
    report = _synthetic_report()
    if not with_distances:
        report["distances"] = []
    path = write_plot(report, tmp_path / "plot.png")
    pixels = image.imread(path)
    assert pixels.ndim == 3 and pixels.shape[0] > 200 and pixels.shape[1] > 400
    rgb = pixels[..., :3]
    assert rgb.std() > 0.05  # not a blank canvas
    colourful = np.abs(rgb[..., 0] - rgb[..., 2]) > 0.2  # the peers' coloured lines
    assert colourful.mean() > 0.001


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
            "measured": float("inf"),
            "threshold": 5.0,
            "status": "fail",
            "ok": False,
        }
    ]
    assert check_report(report) == []
    path = write_report(tmp_path, report)
    data = json.loads(path.read_text())  # strict JSON: no Infinity token
    assert data["assertions"][0]["measured"] is None
    assert "Infinity" not in path.read_text()

    broken = dict(report, passed=False, timeline=list(reversed(report["timeline"])))
    problems = check_report(broken)
    assert any("disagrees" in p for p in problems) and any("time order" in p for p in problems)
    del broken["samples"]
    assert check_report(broken) == ["'samples' missing or not dict"]


CLI = """
import sys
import node.cli as cli
if "node.cmd_chaos" not in cli.VERB_MODULES:  # until the lead registers the verb
    cli.VERB_MODULES = (*cli.VERB_MODULES, "node.cmd_chaos")
sys.exit(cli.main(sys.argv[1:]))
"""


@pytest.mark.timeout(60)
@pytest.mark.parametrize("sig, code", [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_cli_signal_stops_every_peer(tmp_path, sig, code):
    import shlex
    import subprocess

    toml = tmp_path / "s.toml"
    toml.write_text(SCENARIO.replace("duration = 8", "duration = 60"))
    report = tmp_path / "r"
    argv = [sys.executable, "-c", CLI, "chaos", str(toml), "--report", str(report), "--quiet"]
    argv += ["--peer-command", shlex.join(FAKE)]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        ready = [report / "peers" / n / "ready.json" for n in "abc"]
        _poll(lambda: all(r.exists() for r in ready), 30, "three ready peers")
        pids = [json.loads(r.read_text())["pid"] for r in ready]
        proc.send_signal(sig)
        out, _ = proc.communicate(timeout=30)
    finally:
        proc.kill()
        proc.wait()
    assert proc.returncode == code, out.decode()
    assert all(_gone(pid) for pid in pids)
    assert load_report(report / "report.json")["result"] == "interrupted"
