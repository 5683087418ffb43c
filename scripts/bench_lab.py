"""Codecs on the network lab: time to the uncompressed run's accuracy and bytes per peer.

    sudo .venv/bin/python scripts/bench_lab.py --out runs/bench-lab \\
        --codecs none,fp16,int8,topk:0.01 --links 4x100mbit -- START_ARGS...

Runs the lab once per codec (`--compress` added to START_ARGS), the first codec being the
reference (normally `none`). For each run: every peer's final accuracy, the run's wall time
(until the last peer exits), bytes each peer put on its link; and the time at which the peers'
mean accuracy first reached the reference's final mean minus `--within` (and the bytes sent by
then).
Writes `bench.json` and prints a markdown table. `--ref OLD/bench.json` takes the reference
run (and its target) from an earlier invocation instead of running it again.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from scripts.netlab import record
from scripts.netlab.__main__ import _floats, _links
from scripts.netlab.lab import Lab


def one_run(
    out: Path, links: list[str], slow: list[float], args: list[str], hold: bool = True
) -> dict[str, Any]:
    with Lab(links, out, args, slow, ready_timeout=180, hold=hold) as lab:
        rows = record.watch(lab, every=1.0, timeout=3600)
        rep = record.report(lab, rows, None)
    record.save(out, rep, rows)
    return {"report": rep, "rows": rows}


def reached(rows: list[dict[str, Any]], n: int, target: float) -> tuple[float | None, list[int]]:
    """First poll time at which the mean of the n peers' latest accuracies >= target, and each
    one's bytes sent by then."""
    by_t: dict[float, dict[int, dict[str, Any]]] = {}
    for r in rows:
        by_t.setdefault(r["t"], {})[r["peer"]] = r
    latest: dict[int, float] = {}
    for t in sorted(by_t):
        for p, r in by_t[t].items():
            if r.get("acc") is not None:
                latest[p] = r["acc"]
        if len(latest) == n and sum(latest.values()) / n >= target:
            return t, [by_t[t][p]["sent"] for p in sorted(by_t[t])]
    return None, []


def summarise(name: str, run: dict[str, Any], target: float | None) -> dict[str, Any]:
    peers = run["report"]["peers"]
    accs = [p["final_acc"] for p in peers]
    walls = [p["wall_s"] for p in peers if p["wall_s"] is not None]
    t_hit, sent_then = reached(run["rows"], len(peers), target) if target else (None, [])
    return {
        "codec": name,
        "final_acc": accs,
        "mean_acc": sum(a for a in accs if a is not None) / max(1, len(accs)),
        "wall_s": max(walls) if walls else None,
        "sent_bytes": [p["sent_bytes"] for p in peers],
        "t_target": t_hit,
        "sent_at_target": sent_then,
    }


def main() -> None:
    argv = sys.argv[1:]
    start_args = argv[argv.index("--") + 1 :] if "--" in argv else []
    argv = argv[: argv.index("--")] if "--" in argv else argv
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default="runs/bench-lab")
    ap.add_argument("--codecs", default="none,fp16,int8,topk:0.01")
    ap.add_argument("--links", default="4x100mbit")
    ap.add_argument("--slowdown", default="")
    ap.add_argument("--within", type=float, default=0.01, help="accuracy margin (0.01: 1 point)")
    ap.add_argument("--ref", default="", help="bench.json whose first run is the reference")
    ap.add_argument(
        "--no-hold",
        dest="hold",
        action="store_false",
        help="let each peer train from its own start (default: hold every peer until all are "
        "up, then release them together; times count from the release)",
    )
    args = ap.parse_args(argv)
    out = Path(args.out)
    results: list[dict[str, Any]] = []
    target = None
    if args.ref:
        old = json.loads(Path(args.ref).read_text())
        target, results = old["target"], old["runs"][:1]
    for codec in args.codecs.split(","):
        run = one_run(
            out / codec.replace(":", "_"),
            _links(args.links),
            _floats(args.slowdown),
            [*start_args, "--compress", codec],
            args.hold,
        )
        if target is None:
            peers = run["report"]["peers"]
            target = sum(p["final_acc"] for p in peers) / len(peers) - args.within
        results.append(summarise(codec, run, target))
        (out / "bench.json").write_text(json.dumps({"target": target, "runs": results}, indent=1))
    ref = results[0]
    print(f"target: mean accuracy >= {target:.4f} (reference mean final - {args.within})")
    print("| codec | mean final acc | min final acc | wall s | MB sent/peer (mean) "
          "| t to target s | x ref wall | MB/peer at target | x fewer bytes |")  # fmt: skip
    print("|---|---|---|---|---|---|---|---|---|")
    for r in results:
        mb = sum(r["sent_bytes"]) / len(r["sent_bytes"]) / 1e6
        at = (
            sum(r["sent_at_target"]) / len(r["sent_at_target"]) / 1e6
            if r["sent_at_target"]
            else None
        )
        ratio_t = r["t_target"] / ref["wall_s"] if r["t_target"] and ref["wall_s"] else None
        ref_mb = sum(ref["sent_bytes"]) / len(ref["sent_bytes"]) / 1e6
        fewer = ref_mb / at if at else None
        cells = [
            r["codec"], f"{100 * r['mean_acc']:.2f}%", f"{100 * min(r['final_acc']):.2f}%",
            f"{r['wall_s']:.0f}", f"{mb:.0f}",
            "-" if r["t_target"] is None else f"{r['t_target']:.0f}",
            "-" if ratio_t is None else f"{ratio_t:.2f}",
            "-" if at is None else f"{at:.1f}", "-" if fewer is None else f"{fewer:.0f}x",
        ]  # fmt: skip
        print("| " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
