"""The exchange deadlines on slow links, old against new, in one lab run (needs root).

    sudo .venv/bin/python scripts/netlab/deadlines.py --out runs/deadlines \
        [--links 1gbit,1gbit,1gbit,20mbit] [--caps 20] [--arms fixed,tuned] [--duration 100] \
        [--freeze 1] [--freeze-at 50] [--freeze-for 20] [-- START_ARGS...]

Each arm is a fresh lab (scripts/netlab/lab.py: real `python -m swarmnode start` peers, one
namespace each, `tc tbf` both ways), run one after the other with the same links and peers:

- `fixed`: the old rule, every push-pull given the fixed `--exchange-timeout` (the benchmark
  switch `SNBENCH_FIXED_DEADLINE=1`, gossip/link/stats.py);
- `tuned`: the default, a proven partner's push-pull given its link's deadline (bytes each way /
  measured throughput x 4 + round trip, within [1 s, `--exchange-timeout`]).

At `--freeze-at` seconds the peer `--freeze` (on a fast link) is frozen with SIGSTOP for
`--freeze-for` seconds, then resumed with SIGCONT: what a frozen partner costs the others' rounds.

Read from each peer's JSON log at DEBUG (one line per round it started: its failures by partner,
its duration) and its /v1/status, polled each second (answered exchanges per link, every
observer's view of every member's state, each peer's incarnation). Per arm: rounds started,
completed and failed by deadline on the slow links and the fast ones, the time those failed
rounds took, the slow peers' suspicions and deaths in the others' eyes, and the rounds that asked
the frozen peer and what each cost. The table (markdown) is printed and saved as table.md.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import statistics
import sys
import time
from datetime import datetime
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository root

from swarmnode.gossip.link.stats import FIXED_DEADLINE_ENV

from scripts.netlab import net
from scripts.netlab.lab import Lab

DEFAULT_START = [
    "--data", "signal:4000,64,20", "--model", "mlp:1000,1000",  # 1.09 M parameters, 4.3 MB
    "--steps", "1000000", "--step-time", "0.2", "--sync-every", "5", "--eval-every", "100000",
]  # fmt: skip
DEADLINE_RE = re.compile(r"no answer within ([0-9.]+)s")
ROUND_RE = re.compile(r"^exchange round: \w+; asked=(\d+); .*; (\d+) ms$")
MEMBER_RE = re.compile(r"member \S+ \(\w+\) \(([^)]+)\) (\w+) -> (\w+)")
# why a partner of a round gave nothing: the caller's deadline; the round's grace once the others
# answered (a round does not wait for its slowest); the partner's own body deadline (408:
# --body-min-rate); anything else
KINDS = ("deadline", "grace", "body408", "other")


def _by_class(zero: Any) -> dict[str, Any]:
    return {"slow": zero(), "fast": zero()}


class Tally:
    """What the rounds of one arm did: partner requests by link class (a link is slow where
    either end is), the rounds each peer started, the freeze's rounds, suspicions."""

    def __init__(self) -> None:
        self.completed: dict[str, int] = _by_class(int)
        self.failed: dict[str, dict[str, int]] = _by_class(lambda: dict.fromkeys(KINDS, 0))
        self.deadlines: dict[str, list[float]] = _by_class(list)
        self.rounds: dict[str, int] = _by_class(int)  # started, by the starter's own link
        self.unapplied: dict[str, int] = _by_class(int)  # of them: none answered, none mixed
        self.lost_s: dict[str, float] = _by_class(float)  # the seconds those took
        self.frozen_rounds: dict[str, list[float]] = _by_class(list)  # by the asker's link
        self.suspected = 0  # transitions of a slow peer into suspect, in the others' logs
        self.died = 0  # ... into dead
        self.refuted = 0  # incarnations the slow peers gained: deaths heard of and refuted


def parse_log(path: Path) -> list[dict[str, Any]]:
    """The rounds this peer started: {t (unix), ms, failures: {pid: why}} each."""
    out = []
    for line in path.read_text(errors="replace").splitlines():
        try:
            rec = json.loads(line)
        except ValueError:
            continue  # a line the peer printed before its logging was set up
        msg = rec.get("message", "") if isinstance(rec, dict) else ""
        m = ROUND_RE.match(msg)
        if not m:
            continue
        fails = {}
        for part in msg.split("; "):
            pid, sep, why = part.partition(": ")
            if sep and len(pid) >= 16 and " " not in pid:  # a partner's id, not a note
                fails[pid] = why
        out.append(
            {
                "t": _unix(rec["time"]),
                "asked": int(m.group(1)),
                "applied": "; applied" in msg,
                "ms": int(m.group(2)),
                "failures": fails,
            }
        )
    return out


def member_changes(path: Path) -> list[tuple[str, str, str]]:
    """(addr, from, to) for each change of a member's state this peer logged."""
    out = []
    for line in path.read_text(errors="replace").splitlines():
        m = MEMBER_RE.search(line)
        if m:
            out.append((m.group(1), m.group(2), m.group(3)))
    return out


def kind_of_failure(why: str) -> str:
    if DEADLINE_RE.search(why):
        return "deadline"
    if "answered 408" in why:  # its text names the body's own grace: before "grace"
        return "body408"
    return "grace" if "grace after the others" in why else "other"


def _unix(iso: str) -> float:
    return datetime.fromisoformat(iso).timestamp()


def answered_exchanges(rows: list[dict[str, Any]]) -> dict[tuple[int, str], int]:
    """(observer, partner addr) -> answered exchanges, summed over the polls so that a link
    forgotten and started afresh (a partner that came back) keeps what it counted before."""
    last: dict[tuple[int, str], int] = {}
    total: dict[tuple[int, str], int] = {}
    for r in rows:
        for link in r.get("links") or []:
            key = (r["peer"], link["addr"])
            n = int(link.get("exchanges") or 0)
            prev = last.get(key, 0)
            total[key] = total.get(key, 0) + (n - prev if n >= prev else n)
            last[key] = n
    return total


def poll(lab: Lab, t: float) -> list[dict[str, Any]]:
    rows = []
    for p in lab.peers:
        if p.proc.poll() is not None:
            continue
        try:
            st = lab.status(p.index, timeout=1.0)
        except (OSError, ValueError):
            rows.append({"t": t, "peer": p.index, "unreachable": True})
            continue
        me = st["self"]
        rows.append(
            {
                "t": t,
                "peer": p.index,
                "incarnation": me.get("incarnation"),
                "links": me.get("links"),
                "states": {m["peer_id"]: m.get("state") for m in st.get("members", [])},
            }
        )
    return rows


def run_arm(name: str, cap: float, args: argparse.Namespace, start: list[str]) -> dict[str, Any]:
    if name == "fixed":
        os.environ[FIXED_DEADLINE_ENV] = "1"  # the peers inherit the lab's environment
    else:
        os.environ.pop(FIXED_DEADLINE_ENV, None)
    out = Path(args.out) / f"{name}-cap{cap:g}"
    peer_args = [*start, "--exchange-timeout", str(cap), "--log-level", "DEBUG", "--log-json"]
    lab = Lab(args.links.split(","), out, peer_args, hold=True, shards=True)
    rows: list[dict[str, Any]] = []
    frozen_at = thawed_at = None
    with lab:
        ids = {
            p.index: json.loads(p.ready_file.read_text())["peer_id"] for p in lab.peers
        }  # the ready file names each peer's id
        frozen = lab.peers[args.freeze]
        while (t := lab.elapsed()) < args.duration:
            if frozen_at is None and t >= args.freeze_at:
                os.kill(frozen.proc.pid, signal.SIGSTOP)
                frozen_at = time.time()
            if thawed_at is None and frozen_at and t >= args.freeze_at + args.freeze_for:
                os.kill(frozen.proc.pid, signal.SIGCONT)
                thawed_at = time.time()
            rows.extend(poll(lab, t))
            time.sleep(1.0)  # the poll period of a recorder, not a wait for some state
        if thawed_at is None:
            os.kill(frozen.proc.pid, signal.SIGCONT)
            thawed_at = time.time()
        lab.stop_peers()
        (out / "polls.json").write_text(
            json.dumps({"window": [frozen_at, thawed_at], "rows": rows})
        )
        rates = [p.link.rate_bps for p in lab.peers]
        addrs = {p.addr: p.index for p in lab.peers}
        logs = {p.index: parse_log(p.log_file) for p in lab.peers}
        changes = [c for p in lab.peers for c in member_changes(p.log_file)]
    res = summarise(name, cap, ids, addrs, rates, logs, rows, args.freeze, (frozen_at, thawed_at))
    slow_addrs = {a for a, i in addrs.items() if i in res["slow_peers"]}
    res["suspected"] = sum(1 for a, _, to in changes if a in slow_addrs and to == "suspect")
    res["died"] = sum(1 for a, _, to in changes if a in slow_addrs and to == "dead")
    return res


def summarise(
    name: str,
    cap: float,
    ids: dict[int, str],
    addrs: dict[str, int],
    rates: list[float],
    logs: dict[int, list[dict[str, Any]]],
    rows: list[dict[str, Any]],
    freeze: int,
    window: tuple[float | None, float | None],
) -> dict[str, Any]:
    fastest = max(rates)
    slow = {i for i, r in enumerate(rates) if r < fastest}
    by_id = {pid: i for i, pid in ids.items()}
    tally = Tally()

    def cls(i: int, j: int) -> str:  # a link between i and j is as slow as its slower end
        return "slow" if i in slow or j in slow else "fast"

    for (i, addr), n in answered_exchanges(rows).items():
        j = addrs.get(addr)
        if j is not None:
            tally.completed[cls(i, j)] += n
    frozen_at, thawed_at = window
    for i, rounds in logs.items():
        mine = "slow" if i in slow else "fast"
        for r in rounds:
            began = r["t"] - r["ms"] / 1000
            if r["asked"] == 0:
                continue  # nobody to ask: no round
            if i == freeze and frozen_at and r["t"] >= frozen_at and began <= thawed_at:
                continue  # the frozen peer's own round across its freeze measures the freeze
            tally.rounds[mine] += 1
            if not r["applied"]:
                tally.unapplied[mine] += 1
                tally.lost_s[mine] += r["ms"] / 1000
            for pid, why in r["failures"].items():
                j = by_id.get(pid, _prefix(by_id, pid))
                if j is None:
                    continue
                if j == freeze and frozen_at and r["t"] >= frozen_at and began <= thawed_at:
                    # a round that met the freeze: its cost, counted apart
                    tally.frozen_rounds[mine].append(r["ms"] / 1000)
                    continue
                c = cls(i, j)
                kind = kind_of_failure(why)
                tally.failed[c][kind] += 1
                if m := DEADLINE_RE.search(why):
                    tally.deadlines[c].append(float(m.group(1)))
    _count_refutations(tally, rows, slow)
    return {"arm": name, "cap": cap, "slow_peers": sorted(slow), "freeze": freeze, **vars(tally)}


def _prefix(by_id: dict[str, int], pid: str) -> int | None:
    """The peer whose id starts with `pid` (a log line may shorten an id)."""
    hits = [i for full, i in by_id.items() if full.startswith(pid)]
    return hits[0] if len(hits) == 1 else None


def _count_refutations(tally: Tally, rows: list[dict[str, Any]], slow: set[int]) -> None:
    first_inc: dict[int, int] = {}
    last_inc: dict[int, int] = {}
    for r in rows:
        if r["peer"] in slow and r.get("incarnation") is not None:
            first_inc.setdefault(r["peer"], r["incarnation"])
            last_inc[r["peer"]] = r["incarnation"]
    tally.refuted = sum(last_inc[i] - first_inc[i] for i in last_inc)


def table(results: list[dict[str, Any]]) -> str:
    """Two markdown tables: partner requests by link class; rounds, suspicions, the freeze."""
    out = [
        "| arm, cap | link | asked | answered | deadline (its s) | grace cut | 408 body | other |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in results:
        for c in ("slow", "fast"):
            f, d = r["failed"][c], r["deadlines"][c]
            dl = f" ({min(d):.1f}-{max(d):.1f})" if d else ""
            asked = r["completed"][c] + sum(f.values())
            out.append(
                f"| {r['arm']}, {r['cap']:g} s | {c} | {asked} | {r['completed'][c]} "
                f"| {f['deadline']}{dl} | {f['grace']} | {f['body408']} | {f['other']} |"
            )
    out += [
        "",
        "| arm, cap | rounds started (slow / fast peers) | none answered | s lost in them "
        "| slow peer suspect / dead / refuted | freeze: rounds met, s each (fast askers; slow) |",
        "|---|---|---|---|---|---|",
    ]
    for r in results:
        fz = r["frozen_rounds"]
        out.append(
            f"| {r['arm']}, {r['cap']:g} s | {r['rounds']['slow']} / {r['rounds']['fast']} "
            f"| {r['unapplied']['slow']} / {r['unapplied']['fast']} "
            f"| {r['lost_s']['slow']:.1f} / {r['lost_s']['fast']:.1f} "
            f"| {r['suspected']} / {r['died']} / {r['refuted']} "
            f"| {_costs(fz['fast'])}; {_costs(fz['slow'])} |"
        )
    return "\n".join(out) + "\n"


def _costs(xs: list[float]) -> str:
    return f"{len(xs)}: {statistics.mean(xs):.2f} (max {max(xs):.2f})" if xs else "0"


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    start: list[str] = list(DEFAULT_START)
    if "--" in argv:  # after the defaults: a later option wins
        at = argv.index("--")
        argv, start = argv[:at], start + argv[at + 1 :]
    ap = argparse.ArgumentParser(prog="deadlines", description=__doc__.split("\n")[0])
    ap.add_argument("--out", default="runs/deadlines")
    ap.add_argument("--links", default="1gbit,1gbit,1gbit,20mbit", help="one rate per peer")
    ap.add_argument("--caps", default="20", help="--exchange-timeout values, e.g. 5,20")
    ap.add_argument("--arms", default="fixed,tuned")
    ap.add_argument("--duration", type=float, default=100.0, help="seconds per arm")
    ap.add_argument("--freeze", type=int, default=1, help="the peer frozen (a fast link)")
    ap.add_argument("--freeze-at", type=float, default=50.0)
    ap.add_argument("--freeze-for", type=float, default=20.0)
    args = ap.parse_args(argv)
    why = net.can_use_namespaces()
    if why:
        print(f"deadlines: {why}", file=sys.stderr)
        return 2
    results = []
    for cap in [float(c) for c in args.caps.split(",")]:
        for arm in args.arms.split(","):
            if arm not in ("fixed", "tuned"):
                ap.error(f"unknown arm {arm!r}: fixed or tuned")
            print(f"arm {arm}, cap {cap:g} s ...", flush=True)
            results.append(run_arm(arm, cap, args, start))
            print(json.dumps(results[-1]), flush=True)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "results.json").write_text(json.dumps(results, indent=1))
    text = table(results)
    (out / "table.md").write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
