"""Codecs on the network lab: time to the uncompressed run's accuracy and bytes per peer.

    sudo .venv/bin/python scripts/bench/learning/lab.py --out runs/bench-lab \\
        --codecs none,fp16,int8,topk:0.01 --links 4x100mbit -- START_ARGS...

Runs the lab once per codec (`--compress` added to START_ARGS), the first codec being the
reference (normally `none`). Peer i trains on `--shard i/N` (`--same-data`: all of it). For each
run: every peer's final accuracy (the mean of its last `--smooth` evaluations), the run's wall
time (until the last peer exits), bytes each peer put on its link; and the time at which the
peers' mean accuracy (of their latest evaluations; `--smooth-target`) first reached the
reference's final mean minus `--within` (and the bytes sent by then), as a fraction of the
reference's wall time and of the reference's own time to that target.
Writes `bench.json` and prints a markdown table. `--ref OLD/bench.json` takes the reference
run (and its target) from an earlier invocation instead of running it again; `--rescore`
scores the runs already under `--out` again without running anything.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

from scripts.netlab import record
from scripts.netlab.__main__ import _floats, _links
from scripts.netlab.lab import Lab


def one_run(
    out: Path,
    links: list[str],
    slow: list[float],
    args: list[str],
    hold: bool = True,
    shards: bool = True,
) -> None:
    lab = Lab(links, out, args, slow, ready_timeout=180, hold=hold, shards=shards)
    with lab:
        rows = record.watch(lab, every=1.0, timeout=3600)
        rep = record.report(lab, rows, None)
    record.save(out, rep, rows)


def evaluations(rows: list[dict[str, Any]], peer: int) -> list[tuple[float, float]]:
    """(poll time, accuracy) of each of a peer's evaluations, as its polls first showed them."""
    out: list[tuple[float, float]] = []
    for r in rows:
        acc = r.get("acc")
        if r["peer"] == peer and acc is not None and (not out or acc != out[-1][1]):
            out.append((r["t"], acc))
    return out


def smoothed(evals: list[tuple[float, float]], upto: float, k: int) -> float | None:
    """Mean of the last k evaluations seen by poll time `upto` (a peer's own model swings by
    several points from one evaluation to the next on non-iid shards)."""
    seen = [a for t, a in evals if t <= upto][-k:]
    return sum(seen) / len(seen) if seen else None


def reached(
    rows: list[dict[str, Any]], n: int, target: float, k: int
) -> tuple[float | None, list[int]]:
    """First poll time at which the mean of the n peers' smoothed accuracies >= target, and
    each one's bytes sent by then."""
    evals = [evaluations(rows, p) for p in range(n)]
    sent: dict[int, int] = {}
    for t in sorted({r["t"] for r in rows}):
        sent.update({r["peer"]: r["sent"] for r in rows if r["t"] == t})
        accs = [smoothed(e, t, k) for e in evals]
        if None not in accs and sum(accs) / n >= target:  # type: ignore[arg-type]
            return t, [sent[p] for p in sorted(sent)]
    return None, []


def summarise(
    name: str,
    report: dict[str, Any],
    rows: list[dict[str, Any]],
    target: float | None,
    k: tuple[int, int],
) -> dict[str, Any]:
    """A run's figures. A peer's final accuracy is the mean of its last k[0] evaluations, its
    summary's (the model it ended with) counted last; the target is timed over k[1]."""
    peers = report["peers"]
    accs = []
    for p in peers:
        evals = evaluations(rows, p["peer"])
        if p["final_acc"] is not None and (not evals or evals[-1][1] != p["final_acc"]):
            evals.append((float("inf"), p["final_acc"]))
        accs.append(smoothed(evals, float("inf"), k[0]))
    walls = [p["wall_s"] for p in peers if p["wall_s"] is not None]
    t_hit, sent_then = reached(rows, len(peers), target, k[1]) if target else (None, [])
    return {
        "codec": name,
        "final_acc": accs,
        "mean_acc": sum(a for a in accs if a is not None) / max(1, len(accs)),
        "wall_s": max(walls) if walls else None,
        "sent_bytes": [p["sent_bytes"] for p in peers],
        "t_target": t_hit,
        "sent_at_target": sent_then,
    }


def score(
    runs: list[tuple[str, dict[str, Any], list[dict[str, Any]]]],
    within: float,
    k: tuple[int, int],
    target: float | None = None,
) -> tuple[float, list[dict[str, Any]]]:
    """Summaries of (codec, report, rows) runs; the target from the first unless given."""
    if target is None:
        target = summarise(*runs[0], None, k)["mean_acc"] - within
    return target, [summarise(*run, target, k) for run in runs]


def main() -> None:
    argv = sys.argv[1:]
    start_args = argv[argv.index("--") + 1 :] if "--" in argv else []
    argv = argv[: argv.index("--")] if "--" in argv else argv
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default="runs/bench-lab", help="folder for each run and bench.json")
    ap.add_argument(
        "--codecs",
        default="none,fp16,int8,topk:0.01",
        help="comma-separated --compress values, one lab run each; the first is the reference",
    )
    ap.add_argument("--links", default="4x100mbit", help="one rate per peer; 4x100mbit = four")
    ap.add_argument("--slowdown", default="", help="per-peer compute slowdown, e.g. 1,1,1,4")
    ap.add_argument(
        "--same-data",
        dest="shards",
        action="store_false",
        help="give every peer the whole training set (default: peer i trains on --shard i/N, "
        "with the --partition in START_ARGS; a peer with all the data gains little from its "
        "swarm, which hides what a slow link costs)",
    )
    ap.add_argument("--within", type=float, default=0.01, help="accuracy margin (0.01: 1 point)")
    ap.add_argument("--ref", default="", help="bench.json whose first run is the reference")
    ap.add_argument(
        "--no-hold",
        dest="hold",
        action="store_false",
        help="let each peer train from its own start (default: hold every peer until all are "
        "up, then release them together; times count from the release)",
    )
    ap.add_argument("--table", default="", help="only print the table of an earlier bench.json")
    ap.add_argument(
        "--rescore",
        action="store_true",
        help="run nothing: score the runs already under --out (each codec's report.json and "
        "series.json) again, e.g. with another --smooth or --within",
    )
    ap.add_argument(
        "--smooth",
        type=int,
        default=3,
        help="a peer's final accuracy is the mean of its last K evaluations (1: its last alone)",
    )
    ap.add_argument(
        "--smooth-target",
        type=int,
        default=1,
        help="the same for timing the target (default 1: the peers' latest evaluations, as "
        "'first evaluation at the target'; K > 1 lags a rising curve by about K/2 evaluations)",
    )
    args = ap.parse_args(argv)
    if args.table:
        old = json.loads(Path(args.table).read_text())
        print_table(old["target"], old["runs"])
        return
    out = Path(args.out)
    runs: list[tuple[str, dict[str, Any], list[dict[str, Any]]]] = []
    target, ref = None, []
    if args.ref:
        old = json.loads(Path(args.ref).read_text())
        target, ref = old["target"], old["runs"][:1]
    for codec in args.codecs.split(","):
        where = out / codec.replace(":", "_")
        if not args.rescore:
            one_run(
                where,
                _links(args.links),
                _floats(args.slowdown),
                [*start_args, "--compress", codec],
                args.hold,
                args.shards,
            )
        report = json.loads((where / "report.json").read_text())
        runs.append((codec, report, json.loads((where / "series.json").read_text())))
        target, results = score(runs, args.within, (args.smooth, args.smooth_target), target)
        results = ref + results
        (out / "bench.json").write_text(json.dumps({"target": target, "runs": results}, indent=1))
    print_table(target, results)


def print_table(target: float, results: list[dict[str, Any]]) -> None:
    """The markdown table of `results` (the first is the reference) against `target`."""
    ref = results[0]
    print(f"target: mean accuracy >= {target:.4f} (the reference's mean final - the margin)")
    print("| codec | mean final acc | min final acc | wall s | MB sent/peer (mean) "
          "| t to target s | x ref wall | x ref t to target | MB/peer at target "
          "| x fewer bytes |")  # fmt: skip
    print("|---|---|---|---|---|---|---|---|---|---|")
    for r in results:
        mb = sum(r["sent_bytes"]) / len(r["sent_bytes"]) / 1e6
        at = (
            sum(r["sent_at_target"]) / len(r["sent_at_target"]) / 1e6
            if r["sent_at_target"]
            else None
        )
        ratio_t = r["t_target"] / ref["wall_s"] if r["t_target"] and ref["wall_s"] else None
        # against the reference's own time to its target: the wall ratio alone flatters a codec
        # when the reference levels off early in its run
        ratio_own = r["t_target"] / ref["t_target"] if r["t_target"] and ref["t_target"] else None
        ref_mb = sum(ref["sent_bytes"]) / len(ref["sent_bytes"]) / 1e6
        fewer = ref_mb / at if at else None
        cells = [
            r["codec"], f"{100 * r['mean_acc']:.2f}%", f"{100 * min(r['final_acc']):.2f}%",
            f"{r['wall_s']:.0f}", f"{mb:.0f}",
            "-" if r["t_target"] is None else f"{r['t_target']:.0f}",
            "-" if ratio_t is None else f"{ratio_t:.2f}",
            "-" if ratio_own is None else f"{ratio_own:.2f}",
            "-" if at is None else f"{at:.1f}", "-" if fewer is None else f"{fewer:.0f}x",
        ]  # fmt: skip
        print("| " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
