"""The network lab: real peers in network namespaces behind shaped links (needs root).

    python scripts/netlab run --links 100mbit,100mbit,100mbit,100mbit --out runs/x \
        [--slowdown 1,1,1,4] [--target 0.9] [--poll 1] [--timeout 600] -- START_ARGS...
    python scripts/netlab up --links 1gbit,100mbit,20mbit -- START_ARGS...   # until Ctrl-C
    python scripts/netlab scenario hetero-links|link-drop|slow-and-far --out runs/s
    python scripts/netlab --cleanup          # remove every lab's namespaces, links, bridge

START_ARGS go to every `python -m swarmnode start` (e.g. --data, --model, --steps,
--compress); the lab adds --listen/--advertise (the peer's own address), --join (peer 0),
--peer-id, --ready-file, --summary-json and --slowdown. `--links 4x100mbit` is short for four.
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository root

from scripts.netlab import net, record, scenarios
from scripts.netlab.lab import Lab


def _links(text: str) -> list[str]:
    out: list[str] = []
    for part in text.split(","):
        count, x, rate = part.partition("x")
        out += [rate] * int(count) if x and count.isdigit() else [part]
    return out


def _floats(text: str) -> list[float]:
    return [float(v) for v in text.split(",")] if text else []


def _stop_on_signals() -> None:
    def stop(signum: int, _frame: object) -> None:
        raise SystemExit(128 + signum)  # unwinds through Lab.close()

    signal.signal(signal.SIGINT, stop)
    signal.signal(signal.SIGTERM, stop)


def main(argv: list[str] | None = None) -> int:
    try:
        return _main(sys.argv[1:] if argv is None else argv)
    except net.NetLabError as exc:  # a peer that exited, a bad option: one line, not a traceback
        print(f"netlab: error: {exc}", file=sys.stderr)
        return 2


def _main(argv: list[str]) -> int:
    start_args: list[str] = []
    if "--" in argv:
        at = argv.index("--")
        argv, start_args = argv[:at], argv[at + 1 :]
    ap = argparse.ArgumentParser(prog="netlab", description=__doc__.split("\n")[0])
    ap.add_argument("--cleanup", action="store_true", help="remove every lab's leftovers")
    ap.add_argument("verb", nargs="?", choices=["run", "up", "scenario"])
    ap.add_argument("name", nargs="?", help="scenario name")
    ap.add_argument("--links", default="4x100mbit")
    ap.add_argument("--slowdown", default="", help="per-peer compute slowdown, e.g. 1,1,4")
    ap.add_argument("--out", default="runs/netlab")
    ap.add_argument("--target", type=float, default=None, help="accuracy to time, in [0, 1]")
    ap.add_argument("--poll", type=float, default=1.0)
    ap.add_argument("--timeout", type=float, default=900.0)
    ap.add_argument(
        "--hold",
        action="store_true",
        help="hold every peer until all are up, then release them together (times count from "
        "the release); without it the seed trains while the others start",
    )
    ap.add_argument(
        "--shards",
        action="store_true",
        help="peer i trains on --shard i/N (with START_ARGS' --partition); without it every "
        "peer has the whole training set",
    )
    args = ap.parse_args(argv)
    if args.cleanup:
        print("removed:", ", ".join(net.cleanup_stale(everything=True)) or "nothing")
        return 0
    if args.verb is None:
        ap.error("say run, up, scenario or --cleanup")
    why = net.can_use_namespaces()
    if why:
        print(f"netlab: {why}", file=sys.stderr)
        return 2
    _stop_on_signals()
    out = Path(args.out)
    if args.verb == "scenario":
        verdict = scenarios.run(args.name, out, start_args)
        print(json.dumps(verdict, indent=1))
        return 0 if verdict["passed"] else 1
    lab = Lab(
        _links(args.links),
        out,
        start_args,
        _floats(args.slowdown),
        hold=args.hold,
        shards=args.shards,
    )
    with lab:
        for p in lab.peers:
            print(f"p{p.index} {p.addr} {p.link.rate_bps / 1e6:g} Mbit/s ns={p.link.ns}")
        if args.verb == "up":
            while lab.running():
                time.sleep(1.0)  # holding the lab until Ctrl-C
            return 0
        rows = record.watch(lab, every=args.poll, timeout=args.timeout)
        rep = record.report(lab, rows, args.target)
    record.save(out, rep, rows)
    print(json.dumps(rep, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
