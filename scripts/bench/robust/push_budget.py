"""What the bounds on a hostile insider cost with no attacker (issue 22): two swarms side by side.

    .venv/bin/python scripts/bench/robust/push_budget.py [--peers 4] [--duration 60] \\
        [--out runs/budget]

Runs the same clean swarm twice at once on this box, as real `swarmnode start` processes
through the chaos runner: once with `--push-budget on` (the default: per-sender push budget and
travel, anchored radius, bounded answers and the consensus cut, the collapse guard) and once
with `--push-budget off` (the exchange before issue 22). Same task as the hostile scenarios:
`signal:2000,64,20`, `mlp:64`, dirichlet:0.5 shards, 50 paced steps a second, `average`. Both
swarms share the box's load, so their figures compare; the box's load still moves both.

Prints, per swarm: the honest peers' lowest and mean accuracy (mean of the last 3 s) at a few
times, and exchange rounds applied a second per peer; and the differences.
"""

from __future__ import annotations

import argparse
import asyncio
import io
import statistics
from pathlib import Path
from typing import Any

from swarmnode.fault.chaos.runner import ChaosRunner
from swarmnode.fault.chaos.scenario import parse_scenario_text

SCENARIO = """
[scenario]
name = "budget-{state}"
description = "clean swarm, --push-budget {state}"
duration = {duration}
sample_every = 1.0
[node]
model = "mlp:64"
data = "signal:2000,64,20"
partition = "dirichlet:0.5"
steps = 0
eval_every = 50
checkpoint_every = 1000
step_time = 0.02
push_budget = "{state}"
"""


def scenario_text(state: str, peers: int, duration: float) -> str:
    text = SCENARIO.format(state=state, duration=duration)
    return text + "".join(f'[[peer]]\nname = "p{i}"\n' for i in range(peers))


def acc_at(samples: list[dict[str, Any]], t: float, window: float = 3.0) -> float | None:
    vals = [s["acc"] for s in samples if s.get("ok") and s.get("acc") is not None]
    inside = [
        s["acc"]
        for s in samples
        if s.get("ok") and s.get("acc") is not None and t - window <= s["t"] <= t
    ]
    return statistics.fmean(inside) if inside else (vals[-1] if vals else None)


def rounds_per_s(samples: list[dict[str, Any]], t0: float, t1: float) -> float | None:
    w = [s for s in samples if s.get("ok") and s.get("applied") is not None and t0 <= s["t"] <= t1]
    if len(w) < 2 or w[-1]["t"] <= w[0]["t"]:
        return None
    return (w[-1]["applied"] - w[0]["applied"]) / (w[-1]["t"] - w[0]["t"])


def summary(report: dict[str, Any], times: list[float]) -> dict[str, Any]:
    samples = report["samples"]
    out: dict[str, Any] = {"result": report["result"]}
    for t in times:
        accs = [a for a in (acc_at(s, t) for s in samples.values()) if a is not None]
        out[f"{t:g}s"] = (min(accs), statistics.fmean(accs)) if accs else (None, None)
    end = report["durations"]["timeline_s"]
    rates = [r for r in (rounds_per_s(s, 5.0, end) for s in samples.values()) if r is not None]
    out["rounds_per_s"] = statistics.fmean(rates) if rates else None
    return out


async def run(peers: int, duration: float, out: Path) -> dict[str, dict[str, Any]]:
    runners = {
        state: ChaosRunner(
            parse_scenario_text(scenario_text(state, peers, duration), default_name=state),
            out / state,
            out=io.StringIO(),
            quiet=True,
        )
        for state in ("on", "off")
    }
    outcomes = await asyncio.gather(*(r.run() for r in runners.values()))
    times = [t for t in (15.0, 30.0, duration) if t <= duration]
    return {state: summary(o.report, times) for state, o in zip(runners, outcomes, strict=True)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--peers", type=int, default=4)
    ap.add_argument("--duration", type=float, default=60.0)
    ap.add_argument("--out", type=Path, default=Path("runs/push-budget"))
    args = ap.parse_args()
    res = asyncio.run(run(args.peers, args.duration, args.out))
    print(f"{'':>16} {'--push-budget on':>22} {'--push-budget off':>22} {'on - off':>12}")
    for key in res["on"]:
        on, off = res["on"][key], res["off"][key]
        if isinstance(on, tuple) and None not in on and None not in off:
            diff = f"{on[0] - off[0]:+.3f} / {on[1] - off[1]:+.3f}"
            row = (f"{on[0]:.3f} / {on[1]:.3f}", f"{off[0]:.3f} / {off[1]:.3f}", diff)
            print(f"{'acc ' + key + ' min/mean':>16} {row[0]:>22} {row[1]:>22} {row[2]:>12}")
        elif isinstance(on, float) and isinstance(off, float):
            print(f"{key:>16} {on:>22.2f} {off:>22.2f} {on / off:>11.2f}x")
        else:
            print(f"{key:>16} {on!s:>22} {off!s:>22}")
    print(f"reports: {args.out}/on, {args.out}/off")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
