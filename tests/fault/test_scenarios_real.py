"""The short chaos scenarios against real peer processes (`swarmnode chaos` in CI).

Each test runs one `scripts/scenarios/*-short.toml` through the runner exactly as the CLI does,
then checks the report: every assertion passed, and the facts behind the issue's claims (killed
peers came back under their ids from their checkpoints; the partition healed; the byzantine peer
was really serving poison). The three together take about 1.7 minutes on a 2-core box.

The unit tests at the bottom feed synthetic samples to the assertion kinds the real runs exposed
(`merge`, `max_wait`, a same-time kill of two peers).
"""

from __future__ import annotations

import asyncio
import io
import math
from pathlib import Path
from typing import Any

import pytest

from fault.assertions import RunRecord, evaluate
from fault.runner import ChaosRunner
from fault.scenario import load_scenario, parse_scenario_text

SCENARIOS = Path(__file__).resolve().parents[2] / "scripts" / "scenarios"


async def run_short(name: str, report_dir: Path) -> dict[str, Any]:
    """Run `scripts/scenarios/<name>.toml`; fail with the whole verdict table when it fails."""
    out = io.StringIO()
    runner = ChaosRunner(load_scenario(SCENARIOS / f"{name}.toml"), report_dir, out=out, quiet=True)
    outcome = await runner.run()
    report = outcome.report
    verdicts = "\n".join(
        f"  {a['status']}: {a['description']} (measured {a['measured']})"
        for a in report["assertions"]
    )
    assert report["result"] == "pass", f"{name}: {report['result']}\n{verdicts}\n{out.getvalue()}"
    assert outcome.exit_code == 0
    assert not any(p.alive() for p in runner.peers.values()), "a peer outlived the run"
    return report


def _result(report: dict[str, Any], kind: str) -> dict[str, Any]:
    return next(a for a in report["assertions"] if a["kind"] == kind)


@pytest.mark.slow
@pytest.mark.timeout(100)
async def test_kill_half_short(tmp_path):
    run_dir = tmp_path / "run"
    report = await run_short("kill-half-short", run_dir)
    for name in ("c", "d"):
        peer = report["peers"][name]
        assert len(peer["pids"]) == 2, f"{name} was not restarted"
        assert len(peer["peer_ids"]) == 1, f"{name} came back under a new id: {peer['peer_ids']}"
        log = run_dir / peer["logs"][1]  # report paths are relative to the report dir
        second_start = await asyncio.to_thread(log.read_text, errors="replace")
        assert "resumed from checkpoint" in second_start, second_start[-2000:]
    # The survivors noticed both deaths, and kept their accuracy.
    assert len(_result(report, "membership")["per_peer"]) == 4  # {a, b} x {c, d}
    assert _result(report, "accuracy_drop")["measured"] <= 0.02


@pytest.mark.slow
@pytest.mark.timeout(100)
async def test_partition_heal_short(tmp_path):
    report = await run_short("partition-heal-short", tmp_path / "run")
    # During the split each side saw the other side leave the live set, but not its own side:
    # the partition was a real one, not a swarm of isolated peers.
    split = next(e["t"] for e in report["timeline"] if e["action"] == "partition")
    heal = next(e["t"] for e in report["timeline"] if e["action"] == "heal")
    ids = {n: p["peer_ids"][-1] for n, p in report["peers"].items()}
    late_split = [s for s in report["samples"]["a"] if s["ok"] and split + 4 <= s["t"] < heal]
    assert late_split, "no sample of a during the partition"
    assert all(s["members"][ids["b"]] == "alive" for s in late_split)
    assert any(s["members"][ids["c"]] != "alive" for s in late_split)
    assert _result(report, "merge")["measured"] <= 30
    assert _result(report, "reconverge")["measured"] <= 30


@pytest.mark.slow
@pytest.mark.timeout(100)
async def test_byzantine_alie_krum_short(tmp_path):
    report = await run_short("byzantine-alie-krum-short", tmp_path / "run")
    e_samples = [s for s in report["samples"]["e"] if s["ok"]]
    assert e_samples and all((s["byzantine"] or "").startswith("alie") for s in e_samples)
    served = max(s["served"] or 0 for s in e_samples)
    assert served > 10, f"e served only {served} pulls: the attack never reached anyone"
    assert set(_result(report, "final_accuracy")["per_peer"]) == {"a", "b", "c", "d"}


# --- the assertion kinds, on synthetic samples ------------------------------------------------

BASE = """
[scenario]
duration = 30
params_every = 1
[node]
exchange_timeout = 2.0
[[peer]]
name = "a"
[[peer]]
name = "b"
[[peer]]
name = "c"
"""


def _record(samples, timeline=(), final=None) -> RunRecord:
    return RunRecord(
        samples=samples,
        distances=[],
        timeline=list(timeline),
        peer_ids={n: [f"id-{n}"] for n in samples},
        final_state=final or dict.fromkeys(samples, "running"),
        end_t=30.0,
    )


def test_membership_skips_an_observer_killed_in_the_same_breath():
    extra = (
        "[[event]]\nat = 5\naction = 'kill'\npeer = 'b'\n"
        "[[event]]\nat = 5\naction = 'kill'\npeer = 'c'\n"
        "[[assert]]\nkind = 'membership'\nwithin = 5\n"
    )
    gone = {"id-b": "dead", "id-c": "dead"}
    rec = _record(
        {
            "a": [{"t": t, "ok": True, "members": {} if t < 7 else gone} for t in range(11)],
            # b and c answered one last sample at the kill time, blind to each other's death
            "b": [
                {"t": 5.0, "ok": True, "members": {"id-c": "alive"}},
                {"t": 12.0, "ok": True, "members": {"id-c": "dead"}},  # after its restart
            ],
            "c": [
                {"t": 5.0, "ok": True, "members": {"id-b": "alive"}},
                # back after its restart, c lists b dead: hearsay, not its own detection
                {"t": 12.0, "ok": True, "members": {"id-b": "dead"}},
            ],
        },
        timeline=[
            {"t": 5.0, "index": 0, "action": "kill", "peer": "b"},
            {"t": 5.01, "index": 1, "action": "kill", "peer": "c"},
            {"t": 10.0, "index": None, "action": "restart", "peer": "b"},
            {"t": 10.0, "index": None, "action": "restart", "peer": "c"},
        ],
        final={"a": "running", "b": "down", "c": "down"},
    )
    (r,) = evaluate(parse_scenario_text(BASE + extra), rec)
    assert set(r.per_peer) == {"a sees b @5s", "a sees c @5s"}
    assert r.measured == pytest.approx(2.0) and r.status == "pass"


def test_merge_measures_the_time_until_everyone_lists_everyone_alive():
    extra = (
        "[[event]]\nat = 5\naction = 'partition'\ngroups = [['a'], ['b', 'c']]\n"
        "[[event]]\nat = 10\naction = 'heal'\nid = 'h'\n"
        "[[assert]]\nkind = 'merge'\nwithin = 4\n"
    )

    def view(me: str, merged_at: float) -> list[dict[str, Any]]:
        others = [n for n in "abc" if n != me]
        return [
            {
                "t": float(t),
                "ok": True,
                "members": {f"id-{o}": "alive" if t >= merged_at else "dead" for o in others},
            }
            for t in range(20)
        ]

    timeline = [
        {"t": 5.0, "index": 0, "action": "partition"},
        {"t": 10.0, "index": 1, "action": "heal"},
    ]
    rec = _record({"a": view("a", 13), "b": view("b", 11), "c": view("c", 12)}, timeline)
    (r,) = evaluate(parse_scenario_text(BASE + extra), rec)
    assert r.per_peer == {"a": 3.0, "b": 1.0, "c": 2.0}
    assert r.status == "pass"
    rec = _record({"a": view("a", 99), "b": view("b", 11), "c": view("c", 12)}, timeline)
    (r,) = evaluate(parse_scenario_text(BASE + extra), rec)
    assert r.per_peer["a"] == math.inf and r.status == "fail"


def test_max_wait_ignores_the_frozen_peer_and_defaults_to_one_deadline():
    extra = (
        "[[event]]\nat = 5\naction = 'freeze'\npeer = 'c'\n"
        "[[event]]\nat = 9\naction = 'thaw'\npeer = 'c'\n"
        "[[assert]]\nkind = 'max_wait'\n"
    )

    def waits(*values: float) -> list[dict[str, Any]]:
        return [{"t": float(i), "ok": True, "max_round_s": v} for i, v in enumerate(values)]

    # c's own round spans its 4 s freeze: not a wait the others caused
    rec = _record({"a": waits(0.1, 2.1, 2.1), "b": waits(0.2, 0.2), "c": waits(0.1, 4.2)})
    (r,) = evaluate(parse_scenario_text(BASE + extra), rec)
    assert r.threshold == pytest.approx(2.5)  # exchange_timeout + 0.5 s of the round's own work
    assert r.per_peer == {"a": 2.1, "b": 0.2}
    assert r.status == "pass"
    rec.samples["b"] = waits(0.2, 3.9)
    (r,) = evaluate(parse_scenario_text(BASE + extra), rec)
    assert r.measured == pytest.approx(3.9) and r.status == "fail"
