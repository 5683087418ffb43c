"""Lab scenarios, each a lab run with its own checks (not `swarmnode chaos` scenarios: the
chaos runner starts peers on 127.0.0.1 and knows no links; these drive the lab instead).

- hetero-links: 1gbit, 100mbit, 20mbit links; every peer ends within 2 points of the fastest.
- link-drop: three 100mbit peers; p2's link is cut for 10 s then restored. p0 must declare p2
  dead during the cut and alive after it, p0 must train on meanwhile, and p2 must end within
  2 points of p0.
- slow-and-far: the slowest compute (--slowdown 4) behind the slowest link (20mbit); every peer
  ends within 2 points of the fast ones, and no fast peer waits for it (their wall time stays
  within 1.5x of the fastest's).

START_ARGS given on the command line replace the defaults below (digits, a small MLP).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from scripts.netlab import record
from scripts.netlab.lab import Lab

# train until the scenario stops the peers (SIGTERM: they leave and write their summary)
DEFAULT_ARGS = ["--data", "digits", "--model", "mlp:64", "--steps", "0", "--eval-every", "100",
                "--exchange", "average", "--sync-every", "10", "--gossip-interval", "0.3",
                "--slowdown", "5"]  # fmt: skip
DURATION = 30.0
TOLERANCE = 0.02


def _accuracy_checks(rep: dict[str, Any], fast: list[int]) -> list[str]:
    fails = []
    peers = rep["peers"]
    for p in peers:
        if p["exit"] != 0:
            fails.append(f"p{p['peer']} exited with {p['exit']}")
    accs = [p["final_acc"] for p in peers]
    if any(a is None for a in accs):
        return [*fails, f"missing final accuracy: {accs}"]
    best_fast = max(accs[i] for i in fast)
    for p, a in zip(peers, accs, strict=True):
        if a < best_fast - TOLERANCE:
            fails.append(f"p{p['peer']} ended at {a:.4f}, more than 2 points under {best_fast:.4f}")
    return fails


def hetero_links(out: Path, args: list[str]) -> dict[str, Any]:
    with Lab(["1gbit", "100mbit", "20mbit"], out, args) as lab:
        rows = record.watch(lab, every=0.5, timeout=DURATION)
        rep = record.report(lab, rows, None)
    return {"report": rep, "failures": _accuracy_checks(rep, [0])}


def slow_and_far(out: Path, args: list[str]) -> dict[str, Any]:
    # the base slowdown of DEFAULT_ARGS paces everyone; p2 gets 4x that (the last flag wins)
    slow = [[], [], ["--slowdown", "20"]]
    with Lab(["1gbit", "100mbit", "20mbit"], out, args, per_peer_args=slow) as lab:
        rows = record.watch(lab, every=0.5, timeout=DURATION)
        rep = record.report(lab, rows, None)
    fails = _accuracy_checks(rep, [0, 1])
    steps = [max((r.get("step") or 0) for r in rows if r["peer"] == i) for i in range(3)]
    rep["steps"] = steps
    if max(steps[:2]) > 1.5 * min(steps[:2]):
        fails.append(f"a fast peer trained much less than the other (waiting?): steps {steps}")
    if steps[2] >= min(steps[:2]):
        fails.append(f"the slowed peer was not slower: steps {steps}")
    return {"report": rep, "failures": fails}


def link_drop(
    out: Path, args: list[str], cut_at: float = 8.0, cut_for: float = 10.0
) -> dict[str, Any]:
    seen: dict[str, list[tuple[float, str]]] = {"p2_state": []}
    steps_p0: list[tuple[float, int]] = []
    phase = {"cut": False, "restored": False}

    def events(lab: Lab, t: float) -> None:
        if not phase["cut"] and t >= cut_at:
            lab.cut(2)
            phase["cut"] = True
        elif phase["cut"] and not phase["restored"] and t >= cut_at + cut_for:
            lab.restore(2)
            phase["restored"] = True
        try:
            st = lab.status(0, timeout=1.0)
        except OSError:
            return
        state = next((m["state"] for m in st["members"] if m["addr"] == lab.peers[2].addr), "?")
        seen["p2_state"].append((round(t, 2), state))
        steps_p0.append((round(t, 2), st["self"]["step"]))

    with Lab(["100mbit"] * 3, out, args) as lab:
        rows = record.watch(lab, every=0.5, timeout=cut_at + cut_for + 12, events=events)
        rep = record.report(lab, rows, None)
    fails = _accuracy_checks(rep, [0, 1])
    during = [s for t, s in seen["p2_state"] if cut_at + 1 < t < cut_at + cut_for]
    after = [s for t, s in seen["p2_state"] if t > cut_at + cut_for]
    if "dead" not in during:
        fails.append(f"p0 never declared p2 dead during the cut: {during}")
    if "alive" not in after:
        fails.append(f"p2 never came back alive after the restore: {after}")
    cut_steps = [s for t, s in steps_p0 if cut_at < t < cut_at + cut_for]
    if len(cut_steps) >= 2 and cut_steps[-1] <= cut_steps[0]:
        fails.append("p0 stopped training while p2's link was cut")
    return {"report": rep, "failures": fails, "p2_state_seen_by_p0": seen["p2_state"]}


SCENARIOS = {"hetero-links": hetero_links, "link-drop": link_drop, "slow-and-far": slow_and_far}


def run(name: str | None, out: Path, start_args: list[str]) -> dict[str, Any]:
    if name not in SCENARIOS:
        raise SystemExit(f"netlab: unknown scenario {name!r} (known: {', '.join(SCENARIOS)})")
    result = SCENARIOS[name](out, start_args or DEFAULT_ARGS)
    result["scenario"] = name
    result["passed"] = not result["failures"]
    record.save(out, result, [])
    return result
