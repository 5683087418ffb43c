#!/usr/bin/env python
"""Exchange throughput between two peer processes on loopback, against raw sockets.

    .venv/bin/python scripts/bench/exchange/throughput.py     # node: 25.0M float32 (100 MB) each way
    .venv/bin/python scripts/bench/exchange/throughput.py --node-model mlp:2000,900 --rounds 3  # ~2M
    .venv/bin/python scripts/bench/exchange/throughput.py --modes raw,http --params 5000000  # transport
    .venv/bin/python scripts/bench/exchange/throughput.py --modes raw,node,signed,secret  # signing cost
    .venv/bin/python scripts/bench/exchange/throughput.py --modes raw,http,sealed  # signing, transport
    .venv/bin/python scripts/bench/exchange/throughput.py \
        --modes raw,duplex,memcpy,http,node,signed,fp16,lowrank --trace-passes /tmp/passes
                                                  # issue 25's rows, and every pass counted

The figures of merit: issue 25's, each node mode at >= 70% of `duplex` moving the same bytes
(a compressed mode against a duplex of its own frame's size, `duplex@MODE`), at <= 1.5x its CPU
seconds; the older one (issue 10: >= 50%), `node` against `raw`.

(node)  end to end: this process runs a real `swarmnode.gossip.exchange.exchanger.Exchanger` (average mode) with a
        numpy ParamStore, `HttpTransport` and a PeerDirectory that returns one real
        `swarmnode start` process (training, slowed down with --slowdown so that its training
        thread sleeps most of the time; alone in its swarm, so it starts no exchange itself).
        Each `round()` is timed: snapshot into a frame + xxh3, POST, the node's decode + xxh3 +
        validate and (at once) snapshot into a frame, our decode + xxh3 + validate + queued mix.
        See scripts/bench/exchange/node.py.

Transport-only figures, between two helper processes (scripts/bench/exchange/peer.py) on 127.0.0.1,
where helper A drives every measurement against helper B, so the bench process itself is never
in the data path:

(raw)   a plain socket push-pull of the same bytes (sendall, recv_into a preallocated buffer):
        the request, then the answer;
(duplex) the same with both directions at once (each side sends from a second thread while it
        receives): what a full-duplex link allows, the ceiling the node modes are held to;
(memcpy) no socket: one copy of the same bytes each way, in memory already touched (the floor
        under any exchange of them);
(http)  a push-pull through `HttpTransport` to B's `pushpull` route (node/net/app.py) that
        echoes a cached buffer: no snapshot, no wire codec, no mix;
(sealed) the same through `AuthTransport` to an `auth_handlers` echo route, as `--secret` peers:
        request signed by a member key and tagged, answer sealed, both hashed while they move;
(naive) a plain aiohttp POST (`data=bytes`, `await resp.read()`) to a default aiohttp app that
        answers with `await request.read()` / `web.Response(body=...)`.

With `node` among the modes, raw and http move exactly the node's wire frame (header + payload)
each way, so all rows move the same bytes. Latency: one exchange of a ~100k-parameter model,
through the same node path (a second node, --latency-model) and, transport only, through
`HttpTransport` to the echo route.

(fp16, lowrank) signed, as `signed`, both sides with `--compress fp16` / `lowrank:8`: a
        compressed difference each way (gossip/exchange/compressed.py); `duplex@fp16` and
        `duplex@lowrank` move the bytes each of their rounds pushed.

--trace-passes DIR runs the nodes under scripts/bench/exchange/passes.py and traces this process
too: every copy, hash, checksum, finite check, distance, clip, fold and socket pass of the timed
rounds, per side, with its bytes and time (a few us per traced call). The peak RSS of each node
during the timed rounds (its VmHWM, reset before them) is printed in every run.

Rounds interleave raw, http and node so that load from other processes hits them alike; naive
runs afterwards, between a second pair of processes (see the comment in main()). Besides wall
time the table shows the CPU seconds both processes spent per exchange: on a shared machine that
figure moves less than wall time. Every child process is terminated (then killed) on any exit.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import os
import platform
import signal
import statistics
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

import aiohttp

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

from scripts.bench.exchange import node as exchange_node
from scripts.bench.exchange.link import DuplexServer, LinkMeter, LinkRound, duplex_round
from scripts.bench.exchange.node import (
    COMPRESS,
    NODE_MODES,
    NodeBench,
    NodeProcess,
    reset_peak,
    rss_of,
    workdir,
)
from scripts.netlab.net import LabNet, parse_rate

WARMUP_ROUNDS = 3
PEER = Path(__file__).resolve().parent / "peer.py"
TARGET = 0.5  # node throughput as a fraction of raw (issue 10)
FLOOR_TARGET = 0.7  # each node mode's throughput as a fraction of duplex, same bytes (issue 25)
FLOOR_CPU = 1.5  # ... at most this many times duplex's CPU seconds
SMALL = 64 << 10  # traced calls over fewer bytes are not counted as passes over a model
HELPER_MODES = ("raw", "duplex", "memcpy", "http", "sealed", "naive")
SIGN_TARGET = 1.05  # a signed exchange's time over the unsigned one's (issue 10)
FULL_PARAMS = 25_000_000  # the size the target is set for


class Peer:
    """A benchmark peer subprocess; `ports` = (http, naive, raw)."""

    def __init__(self) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, str(PEER)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
        )
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline().split()
        if not line or line[0] != "ready":
            self.close()
            raise SystemExit(f"benchmark peer failed to start: {line}")
        self.http, self.naive, self.raw = (int(p) for p in line[1:4])

    def run(self, target: Peer, mode: str, size: int, reps: int) -> dict[str, Any]:
        """Wall seconds per rep and this peer's CPU seconds over all reps."""
        spec = {
            "mode": mode.split("@")[0],  # duplex@fp16: duplex, at fp16's size
            "size": size,
            "reps": reps,
            "http_port": target.http,
            "naive_port": target.naive,
            "raw_port": target.raw,
        }
        return self._post("bench/run", spec)

    def cpu(self) -> float:
        return self._post("bench/cpu", {})["cpu"]

    def _post(self, route: str, msg: dict[str, Any]) -> Any:
        req = urllib.request.Request(
            f"http://127.0.0.1:{self.http}/v1/{route}",
            data=json.dumps(msg).encode(),
            headers={"Content-Type": "application/octet-stream"},
        )
        with urllib.request.urlopen(req, timeout=600) as resp:
            return json.loads(resp.read())

    def close(self) -> None:
        if self.proc.stdin:
            self.proc.stdin.close()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def measure(
    driver: Peer,
    target: Peer,
    mode: str,
    size: int,
    wall: dict[str, list[float]],
    cpu: dict[str, list[float]],
) -> None:
    """One exchange: its wall time, and the CPU both processes spent on it."""
    t0 = target.cpu()
    got = driver.run(target, mode, size, 1)
    wall[mode] += got["wall"]
    cpu[mode].append(got["cpu"] + target.cpu() - t0)


def pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, round(q * (len(xs) - 1)))]


def _sigterm(signum: int, frame: object) -> None:
    raise SystemExit(128 + signum)  # run the finally blocks: children are terminated


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument(
        "--params", type=int, default=25_000_000, help="float32 parameters (without node mode)"
    )
    ap.add_argument("--rounds", type=int, default=5, help="interleaved rounds of each mode")
    ap.add_argument("--latency-params", type=int, default=100_000, help="http latency size")
    ap.add_argument("--latency-reps", type=int, default=50)
    ap.add_argument("--modes", default="raw,http,node,naive")
    ap.add_argument(
        "--node-model",
        default="mlp:6000,4100",
        help="the node's model (digits: 64 in, 10 out); mlp:6000,4100 = 25,035,110 params",
    )
    ap.add_argument(
        "--latency-model", default="mlp:1340", help="the latency node's model (100,510 params)"
    )
    ap.add_argument(
        "--slowdown",
        type=float,
        default=50.0,
        help="the nodes' --slowdown: their training threads sleep (1 - 1/S) of the time",
    )
    ap.add_argument("--node-device", default="cpu", help="the nodes' --device")
    ap.add_argument(
        "--link",
        default="",
        metavar="RATE",
        help="node modes only: each node in its own network namespace behind a tc-shaped link "
        "of RATE (e.g. 1gbit; scripts/netlab, root), as a peer on another host; with a raw duplex "
        "across a link of its own, and per round each direction's bytes, rate and overlap "
        "(scripts/bench/exchange/link.py)",
    )
    ap.add_argument(
        "--push-budget",
        default="on",
        choices=("on", "off"),
        help="node modes: the initiator's --push-budget (issue 22's bounds on its answers: one "
        "pass each and the consensus kept); the node's own is off (it has no rounds of its own)",
    )
    ap.add_argument(
        "--trace-passes",
        default="",
        metavar="DIR",
        help="trace every pass over the data in the nodes and this process into DIR "
        "(scripts/bench/exchange/passes.py) and print the passes of a timed round, per side",
    )
    args = ap.parse_args()
    exchange_node.PUSH_BUDGET = args.push_budget == "on"
    signal.signal(signal.SIGTERM, _sigterm)

    modes = args.modes.split(",")
    unknown = set(modes) - {*HELPER_MODES, *NODE_MODES}
    if unknown:
        ap.error(f"unknown modes: {', '.join(sorted(unknown))}")
    node_modes = [m for m in modes if m in NODE_MODES]
    with_node = bool(node_modes)
    helper_modes = [m for m in modes if m in HELPER_MODES]
    if args.link and (helper_modes or not with_node):
        ap.error("--link measures node modes only (node, signed, secret, fp16, lowrank)")
    trace = Path(args.trace_passes) if args.trace_passes else None
    if trace is not None:
        trace.mkdir(parents=True, exist_ok=True)
        for old in trace.glob("*.jsonl"):
            old.unlink()
        from scripts.bench.exchange.passes import install

        install(trace / "bench.jsonl")
    run = Run(args, modes, node_modes, helper_modes, trace)
    with workdir() as tmp, asyncio.Runner() as loop:
        try:
            run.go(loop, Path(tmp))
        finally:
            run.close(loop)
    report(args, run)
    if trace is not None:
        print_passes(run, trace)
    return 0


class Run:
    """One run of the benchmark: its processes, and what each mode measured."""

    def __init__(
        self,
        args: argparse.Namespace,
        modes: list[str],
        node_modes: list[str],
        helper_modes: list[str],
        trace: Path | None,
    ) -> None:
        self.args, self.modes, self.node_modes = args, modes, node_modes
        self.helper_modes, self.trace = helper_modes, trace
        self.size = 4 * args.params
        self.sizes: dict[str, int] = {}  # bytes each way, per row
        self.wall: dict[str, list[float]] = {}
        self.cpu: dict[str, list[float]] = {}
        self.peers: list[Peer] = []
        self.nodes: list[NodeProcess] = []
        self.benches: list[NodeBench] = []
        self.mode_bench: dict[str, NodeBench] = {}
        self.windows: dict[str, list[tuple[float, float]]] = {}  # per node mode, bench side
        self.rss: dict[str, tuple[int, int]] = {}  # per node mode: (before, peak in rounds)
        self.bench_rss = (0, 0)
        self.lat: list[float] = []
        self.node_lat: list[float] = []
        self.info: dict[str, Any] = {}
        self.end = 0.0
        args = self.args
        # with --link: one link per node (the latency node's last) and one for the raw duplex
        self.net = LabNet([parse_rate(args.link)] * (len(node_modes) + 2)) if args.link else None
        self.link_rounds: dict[str, list[LinkRound]] = {}  # per row, with --link
        self.duplex: DuplexServer | None = None

    def go(self, loop: asyncio.Runner, tmp: Path) -> None:
        args = self.args
        if self.net is not None:
            self.net.create()
            self.duplex = DuplexServer(self.net.links[-1])
        if self.node_modes:  # started first: building a 25M model takes a while
            self._start_nodes(loop, tmp)
        fast = [m for m in self.helper_modes if m != "naive"]
        if self.helper_modes:
            self.peers += [Peer(), Peer()]
        # the rows each round runs, with their bytes: the helper modes at the node's frame
        # size; a compressed node mode also gets a duplex (and memcpy) of its own frame's size
        rows = [(m, self.size) for m in fast]
        for m in self.node_modes:
            self.sizes[m] = self.mode_bench[m].bytes_per_round
            if m in COMPRESS:
                rows += [(f"{b}@{m}", self.sizes[m]) for b in ("duplex", "memcpy") if b in fast]
        for row, size in rows:
            self.sizes[row] = size
        for row in [r for r, _ in rows] + self.modes:
            self.wall.setdefault(row, [])
            self.cpu.setdefault(row, [])
        if self.peers:
            a, b = self.peers
            for row, size in rows:  # warm-up, unrecorded: pools connected, buffers touched
                a.run(b, row, size, 1)
        if self.duplex is not None:
            self.wall["duplex"], self.cpu["duplex"] = [], []
            self.sizes["duplex"] = self.size
            duplex_round(self.duplex, self.size)  # warm-up, unrecorded: buffers touched
        self._reset_peaks()
        for _ in range(args.rounds):
            for row, size in rows:
                measure(self.peers[0], self.peers[1], row, size, self.wall, self.cpu)
            if self.duplex is not None:
                self._metered("duplex", lambda: duplex_round(self.duplex, self.size))
            for m, bench in self.mode_bench.items():
                self._metered(m, lambda b=bench: loop.run(b.round()))
                self.windows[m].append((bench.window_start, bench.window_end))
        self._read_peaks()
        self.end = time.monotonic()
        if "http" in self.modes:
            a, b = self.peers
            size = 4 * args.latency_params
            self.lat = a.run(b, "http", size, args.latency_reps)["wall"]
        if self.node_modes:
            self._latency(loop)
        if "naive" in self.modes:
            c, d = Peer(), Peer()
            self.peers += [c, d]
            c.run(d, "naive", self.size, 1)
            for _ in range(args.rounds):
                measure(c, d, "naive", self.size, self.wall, self.cpu)

    def _metered(self, row: str, one: Callable[[], tuple[float, float]]) -> tuple[float, float]:
        """One timed exchange of `row`, with --link its link's counters sampled through it."""
        meter = None
        if self.net is not None:
            n = len(self.node_modes) + 1 if row == "duplex" else self.node_modes.index(row)
            meter = LinkMeter(self.net.links[n])
            meter.begin()
        w, c = one()
        if meter is not None:
            self.link_rounds.setdefault(row, []).append(meter.end())
        self.wall[row].append(w)
        self.cpu[row].append(c)
        return w, c

    def _start_nodes(self, loop: asyncio.Runner, tmp: Path) -> None:
        args = self.args
        runs = [(args.node_model, m) for m in self.node_modes]
        for model, mode in [*runs, (args.latency_model, self.node_modes[0])]:
            n = len(self.nodes)
            self.nodes.append(
                NodeProcess(
                    model,
                    slowdown=args.slowdown,
                    device=args.node_device,
                    workdir=tmp / f"{mode}-{n}",
                    mode=mode,
                    link=None if self.net is None else self.net.links[n],
                    trace=None if self.trace is None else self.trace / f"node-{mode}-{n}.jsonl",
                )
            )
        for node in self.nodes:
            node.wait_ready()
            bench = NodeBench(node)
            self.benches.append(bench)
            if node is not self.nodes[-1]:  # the latency node's member joins when used
                loop.run(bench.connect())
        big = self.benches[0]
        self.size = big.frame_bytes  # raw and http move exactly the node's frame
        self.info = {"model": args.node_model, "params": big.n_params}
        self.mode_bench = dict(zip(self.node_modes, self.benches, strict=False))
        self.windows = {m: [] for m in self.node_modes}
        # warm-up, unrecorded: pool connected, code imported, and the first few hundred MB of
        # buffers touched (on a VM the first touch of memory the guest never used costs host
        # page faults, up to 25x a reused page here: the start of a peer's life, not its steady
        # state); a compressed pair's first frames are whole, later ones differences
        for _ in range(WARMUP_ROUNDS):
            for bench in self.mode_bench.values():
                loop.run(bench.round())

    def _reset_peaks(self) -> None:
        for m, bench in self.mode_bench.items():
            self.rss[m] = (bench.node.rss()[0], 0)
            bench.node.reset_peak()
        self.bench_rss = (rss_of()[0], 0)
        reset_peak()

    def _read_peaks(self) -> None:
        for m, bench in self.mode_bench.items():
            self.rss[m] = (self.rss[m][0], bench.node.rss()[1])
        self.bench_rss = (self.bench_rss[0], rss_of()[1])

    def _latency(self, loop: asyncio.Runner) -> None:
        args = self.args
        small = self.benches[-1]
        # joined now, not minutes ago: a member silent all through the 100 MB rounds would
        # have been declared dead and forgotten by its node meanwhile
        loop.run(small.connect())
        for _ in range(3):
            loop.run(small.round())  # warm-up
        self.node_lat = [loop.run(small.round())[0] for _ in range(args.latency_reps)]
        self.info["latency_model"] = args.latency_model
        self.info["latency_params"] = small.n_params
        self.info["latency_frame"] = small.frame_bytes

    def close(self, loop: asyncio.Runner) -> None:
        for bench in self.benches:
            loop.run(bench.close())
        for node in self.nodes:
            node.close()
        for peer in self.peers:
            peer.close()
        if self.duplex is not None:
            self.duplex.close()
        if self.net is not None:
            self.net.teardown()


WHAT = {
    "raw": "raw socket push-pull: the request, then the answer",
    "duplex": "raw socket push-pull, both directions at once (the reference)",
    "memcpy": "one memory copy each way, no socket (the floor)",
    "http": "HttpTransport -> echo route (transport only)",
    "sealed": "the same in envelopes: signed, HMAC, answer sealed (transport only)",
    "naive": "default aiohttp client/server (transport only)",
    "node": "Exchanger.round() -> swarmnode start, unsigned (end to end)",
    "signed": "the same, requests signed by the member key (open admission, the default)",
    "secret": "the same with --secret: signed, HMAC, answers sealed",
    "fp16": "signed, both sides --compress fp16",
    "lowrank": "signed, both sides --compress lowrank:8",
}


def reference(run: Run, row: str) -> str | None:
    """The row a row is held to: duplex of the same bytes where measured, else raw."""
    base = row.split("@")[0]
    if base in ("duplex", "memcpy", "naive") or not run.wall.get("duplex"):
        return "raw" if run.wall.get("raw") and row != "raw" else None
    if row in COMPRESS and run.sizes.get(row) != run.sizes.get("duplex"):
        return f"duplex@{row}" if run.wall.get(f"duplex@{row}") else None
    return "duplex" if row != "duplex" else None


def report(args: argparse.Namespace, run: Run) -> None:
    modes, wall, cpu, info = run.modes, run.wall, run.cpu, run.info
    print(
        f"machine: {os.cpu_count()} cpus, {platform.machine()}, {platform.system()} "
        f"{platform.release()}, load average {os.getloadavg()[0]:.1f}; "
        f"python {platform.python_version()}; aiohttp {aiohttp.__version__}"
    )
    if info:
        print(
            f"push-pull of a {info['params']:,}-parameter model ({info['model']}: a "
            f"{run.size / 1e6:.1f} MB wire frame each way), {args.rounds} rounds; node --slowdown "
            f"{args.slowdown:g}" + (f"; each node behind a {args.link} link" if args.link else "")
        )
    else:
        print(
            f"push-pull of {args.params:,} float32 ({run.size / 1e6:.0f} MB each way), "
            f"{args.rounds} rounds"
        )
    print(
        f"{'mode':<15}{'MB each way':>12}{'median s':>9}{'min s':>8}{'GB/s':>7}{'of ref':>8}"
        f"{'cpu s':>8}{'cpu / ref':>10}  ref: what"
    )
    rows = [r for r in wall if wall[r]]
    for m in rows:
        med, c = statistics.median(wall[m]), statistics.median(cpu[m])
        size = run.sizes.get(m, run.size)
        ref = reference(run, m)
        frac = cfrac = "-"
        if ref is not None:
            frac = f"{statistics.median(wall[ref]) / med:.0%}"
            ref_cpu = statistics.median(cpu[ref])
            cfrac = f"{c / ref_cpu:.2f}x" if ref_cpu > 0 and c == c else "-"
        print(
            f"{m:<15}{size / 1e6:>12.2f}{med:>9.3f}{min(wall[m]):>8.3f}{2 * size / med / 1e9:>7.2f}"
            f"{frac:>8}{c:>8.3f}{cfrac:>10}  {ref or '-'}: {WHAT[m.split('@')[0]]}"
        )
    print(
        "  (of ref: the reference row's time / this row's, medians, the same bytes each way; cpu "
        "s: both processes' CPU per exchange, the node's incl. any training step in the window)"
    )
    for m, (before, peak) in run.rss.items():
        print(
            f"peak RSS of the {m} node during its timed rounds: {peak / 1e6:.0f} MB "
            f"({before / 1e6:.0f} MB before them; {(peak - before) / 1e6:+.0f} MB)"
        )
    if run.rss:
        before, peak = run.bench_rss
        print(
            f"peak RSS of this process (every mode's initiator) during the timed rounds: "
            f"{peak / 1e6:.0f} MB ({before / 1e6:.0f} MB before them)"
        )
    if run.lat:
        print(
            f"latency, {args.latency_params:,} float32 ({4 * args.latency_params / 1e3:.0f} KB) "
            f"push-pull via HttpTransport to the echo route (transport only), "
            f"{args.latency_reps} reps: median {statistics.median(run.lat) * 1e3:.2f} ms, "
            f"p90 {pct(run.lat, 0.9) * 1e3:.2f} ms"
        )
    if run.node_lat:
        print(
            f"latency, one Exchanger.round() with a {info['latency_params']:,}-parameter node "
            f"({info['latency_model']}, {info['latency_frame'] / 1e3:.0f} KB frame), "
            f"{args.latency_reps} reps: median {statistics.median(run.node_lat) * 1e3:.2f} ms, "
            f"p90 {pct(run.node_lat, 0.9) * 1e3:.2f} ms"
        )
    signing_overhead(modes, wall, cpu)
    floor_verdicts(run)
    if run.link_rounds:
        link_report(args, run)
    raw_wall = statistics.median(wall["raw"]) if wall.get("raw") else None
    if "node" in modes and raw_wall:
        frac = raw_wall / statistics.median(wall["node"])
        verdict = "PASS" if frac >= TARGET else "MISS"
        print(
            f"{verdict}: end-to-end node exchange at {frac:.0%} of raw-socket throughput "
            f"(issue 10: target >= {TARGET:.0%}, {info['params']:,} parameters)"
        )
        if info["params"] < 0.9 * FULL_PARAMS:
            print(f"  (a smoke size: the target is set for {FULL_PARAMS / 1e6:.0f}M parameters)")


LINK_TARGET = 0.90  # issue 32 goal 3: a round's model each way at >= 90% of the link's rate


def link_report(args: argparse.Namespace, run: Run) -> None:
    """With --link, per round: what each direction carried and at what share of the link.
    `round`: the model's bytes each way over the round's wall time (the figure of merit);
    `push`/`answer`: each direction's goodput over the span of its own bulk (LinkMeter);
    `overlap`: the share of the shorter span during which the other direction also ran;
    `before`: seconds of the round before the push's bulk began (its snapshot, frame, hash,
    head); `gate`: from the answer's bulk to its last byte (the last bytes wait for the push's
    checks at the responder); `after`: from then to the round's end (the answer's checks)."""
    rate = parse_rate(args.link)
    print(
        f"\nthe {args.link} link, per round (shares of {rate / 1e6:g} Mbit/s, goodput; push/answ "
        "MB: the veth's counters; push/answer: over the span of each one's middle 96%):"
    )
    print(
        f"{'mode':<8}{'round':>6}{'model MB':>9}{'push MB':>8}{'answ MB':>8}{'round s':>8}"
        f"{'round':>7}{'push':>7}{'answer':>7}{'push s':>7}{'answ s':>7}{'overlap':>8}"
        f"{'before':>7}{'gate':>6}{'after':>7}"
    )
    for row, rounds in run.link_rounds.items():
        size = run.sizes.get(row, run.size)
        for i, (wall, lr) in enumerate(zip(run.wall[row], rounds, strict=True)):
            print(
                f"{row:<8}{i + 1:>6}{size / 1e6:>9.2f}{lr.push.wire_bytes / 1e6:>8.2f}"
                f"{lr.answer.wire_bytes / 1e6:>8.2f}{wall:>8.3f}{size * 8 / wall / rate:>7.1%}"
                f"{lr.push.share(size, rate):>7.1%}{lr.answer.share(size, rate):>7.1%}"
                f"{lr.push.span:>7.3f}{lr.answer.span:>7.3f}{lr.overlap:>8.0%}"
                f"{lr.push.start:>7.3f}{lr.answer.last - lr.answer.end:>6.3f}"
                f"{lr.elapsed - lr.answer.last:>7.3f}"
            )
    duplex = run.wall.get("duplex")
    for row in run.link_rounds:
        if row == "duplex":
            continue
        share = run.sizes.get(row, run.size) * 8 / statistics.median(run.wall[row]) / rate
        of_duplex = (
            f", {statistics.median(duplex) / statistics.median(run.wall[row]):.0%} of the raw duplex"
            if duplex
            else ""
        )
        print(
            f"{'PASS' if share >= LINK_TARGET else 'MISS'}: {row} moves its model each way at "
            f"{share:.1%} of the {args.link} link (median round; target >= {LINK_TARGET:.0%})"
            f"{of_duplex}"
        )


def floor_verdicts(run: Run) -> None:
    """Issue 25: every node mode at >= 70% of a duplex of its bytes, at <= 1.5x its CPU."""
    for m in run.node_modes:
        ref = reference(run, m)
        if ref is None or not ref.startswith("duplex"):
            continue
        frac = statistics.median(run.wall[ref]) / statistics.median(run.wall[m])
        cpu = statistics.median(run.cpu[m]) / statistics.median(run.cpu[ref])
        ok = frac >= FLOOR_TARGET and cpu <= FLOOR_CPU
        print(
            f"{'PASS' if ok else 'MISS'}: {m} at {frac:.0%} of {ref} (target >= "
            f"{FLOOR_TARGET:.0%}), {cpu:.2f}x its CPU (target <= {FLOOR_CPU:g}x)"
        )


def print_passes(run: Run, trace: Path) -> None:
    """Per node mode, the traced passes of one timed round (means over the rounds), per side:
    this process (the initiator) within each round and its untimed fold; the node (the
    responder) from each round's start to the next one's (its mix lands after the answer)."""
    bench = _events(trace / "bench.jsonl")
    for m, windows in run.windows.items():
        if not windows:
            continue
        n = run.node_modes.index(m)  # the node started for this mode (_start_nodes)
        node_events = _events(trace / f"node-{m}-{n}.jsonl")
        starts = [w[0] for w in windows] + [run.end]
        node_windows = list(itertools.pairwise(starts))
        print(f"\npasses of one {m} round ({len(windows)} rounds; model {run.size / 1e6:.1f} MB):")
        print(f"{'side':<10}{'pass':<30}{'calls':>6}{'MB':>9}{'ms':>9}{'cpu ms':>9}{'GB/s':>7}")
        for side, events, wins in (
            ("initiator", bench, windows),
            ("responder", node_events, node_windows),
        ):
            table = _tally(events, wins)
            total = [0.0, 0.0]
            for kind, (calls, nbytes, wall, cpu) in sorted(table.items(), key=lambda kv: -kv[1][2]):
                k = len(wins)
                rate = nbytes / wall / 1e9 if wall > 0 else 0.0
                print(
                    f"{side:<10}{kind:<30}{calls / k:>6.1f}{nbytes / k / 1e6:>9.1f}"
                    f"{wall / k * 1e3:>9.1f}{cpu / k * 1e3:>9.1f}{rate:>7.1f}"
                )
                if not kind.startswith(("receive", "send")):
                    total[0] += wall / k
                    total[1] += cpu / k
            print(
                f"{side:<10}{'(passes but the socket)':<30}{'':>6}{'':>9}"
                f"{total[0] * 1e3:>9.1f}{total[1] * 1e3:>9.1f}"
            )


def _events(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    out = []
    for line in path.read_text().splitlines():
        try:
            out.append(json.loads(line))
        except json.JSONDecodeError:  # a line cut by the process's exit
            continue
    return out


def _tally(
    events: list[dict[str, Any]], windows: list[tuple[float, float]]
) -> dict[str, list[float]]:
    table: dict[str, list[float]] = {}
    for e in events:
        if e["bytes"] < SMALL or not any(lo <= e["t"] < hi for lo, hi in windows):
            continue  # small: a membership message's body, not a pass over a model
        row = table.setdefault(e["kind"], [0, 0, 0.0, 0.0])
        row[0] += 1
        row[1] += e["bytes"]
        row[2] += e["wall"]
        row[3] += e["cpu"]
    return table


def signing_overhead(
    modes: list[str], wall: dict[str, list[float]], cpu: dict[str, list[float]]
) -> None:
    """The signed modes against the unsigned node path measured in the same run (issue 10's
    target: signing and verifying cost at most 5% of the exchange)."""
    for base, signed in (("node", ("signed", "secret")), ("http", ("sealed",))):
        if base not in modes:
            continue
        for m in signed:
            if m in modes:
                _overhead(m, base, wall, cpu)


def _overhead(m: str, base: str, wall: dict[str, list[float]], cpu: dict[str, list[float]]) -> None:
    med, c = statistics.median(wall[m]), statistics.median(cpu[m])
    ref, ref_cpu = statistics.median(wall[base]), statistics.median(cpu[base])
    pairs = [s / u for s, u in zip(wall[m], wall[base], strict=True)]
    verdict = "PASS" if med / ref <= SIGN_TARGET else "MISS"
    what = "unsigned node" if base == "node" else "unsigned http"
    print(
        f"{verdict}: {m} / {what} = {med / ref:.3f} wall (medians; per round "
        f"{statistics.median(pairs):.3f}, range {min(pairs):.3f}-{max(pairs):.3f}), "
        f"{c / ref_cpu:.3f} CPU (target <= {SIGN_TARGET:.2f})"
    )


if __name__ == "__main__":
    sys.exit(main())
