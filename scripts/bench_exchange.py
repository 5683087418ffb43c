#!/usr/bin/env python
"""Exchange throughput between two peer processes on loopback, against raw sockets.

    .venv/bin/python scripts/bench_exchange.py               # 25M float32 (100 MB) each way
    .venv/bin/python scripts/bench_exchange.py --params 5000000 --rounds 3

Two processes (scripts/_bench_peer.py) serve on 127.0.0.1. Peer A drives every measurement
against peer B, so the bench process itself is never in the data path:

(a) raw:   a plain socket push-pull of the same bytes (sendall, recv_into a preallocated buffer);
(b) http:  a push-pull through `HttpTransport` to B's `pushpull` route (node/http_app.py):
           N bytes up, N bytes back, as an average-mode exchange does;
(c) naive: a plain aiohttp POST (`data=bytes`, `await resp.read()`) to a default aiohttp app
           that answers with `await request.read()` / `web.Response(body=...)`;
(d) the latency of one `HttpTransport` exchange of a 100k-parameter (400 KB) model.

Rounds interleave raw and http so that load from other processes hits both alike; naive runs
afterwards, between a second pair of processes (see the comment in main()). Besides wall time the table shows the CPU seconds
both processes spent per exchange: on a shared machine that figure moves less than wall time.
The figure of merit is the http throughput as a fraction of raw (target >= 50%).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import urllib.request
from pathlib import Path
from typing import Any

import aiohttp

PEER = Path(__file__).resolve().parent / "_bench_peer.py"


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
            "mode": mode,
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


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--params", type=int, default=25_000_000, help="float32 parameters")
    ap.add_argument("--rounds", type=int, default=5, help="interleaved rounds of each mode")
    ap.add_argument("--latency-params", type=int, default=100_000)
    ap.add_argument("--latency-reps", type=int, default=50)
    ap.add_argument("--modes", default="raw,http,naive")
    args = ap.parse_args()

    size = 4 * args.params
    modes = args.modes.split(",")
    # The naive baseline runs last, between its own pair of processes: its 100 MB `bytes` copies
    # (160k page faults per request) left the fast path up to 3x slower in CPU for a while after,
    # even in other processes, when the modes were interleaved.
    fast = [m for m in modes if m != "naive"]
    a, b = Peer(), Peer()
    peers = [a, b]
    wall: dict[str, list[float]] = {m: [] for m in modes}
    cpu: dict[str, list[float]] = {m: [] for m in modes}
    try:
        for m in fast:  # warm-up, unrecorded: pools connected, buffers touched, code imported
            a.run(b, m, size, 1)
        for _ in range(args.rounds):
            for m in fast:
                measure(a, b, m, size, wall, cpu)
        lat = a.run(b, "http", 4 * args.latency_params, args.latency_reps)["wall"]
        if "naive" in modes:
            c, d = Peer(), Peer()
            peers += [c, d]
            c.run(d, "naive", size, 1)
            for _ in range(args.rounds):
                measure(c, d, "naive", size, wall, cpu)
    finally:
        for peer in peers:
            peer.close()

    print(
        f"machine: {os.cpu_count()} cpus, {platform.machine()}, {platform.system()} "
        f"{platform.release()}, load average {os.getloadavg()[0]:.1f}; "
        f"python {platform.python_version()}; aiohttp {aiohttp.__version__}"
    )
    print(
        f"push-pull of {args.params:,} float32 ({size / 1e6:.0f} MB each way), {args.rounds} rounds"
    )
    print(
        f"{'mode':<7}{'median s':>9}{'min s':>8}{'GB/s':>7}{'of raw':>8}"
        f"{'cpu s':>8}{'cpu of raw':>12}"
    )
    raw_wall = statistics.median(wall["raw"]) if "raw" in wall else None
    raw_cpu = statistics.median(cpu["raw"]) if "raw" in cpu else None
    for m in modes:
        med, c = statistics.median(wall[m]), statistics.median(cpu[m])
        frac = f"{raw_wall / med:>8.0%}" if raw_wall else f"{'-':>8}"
        cfrac = f"{raw_cpu / c:>12.0%}" if raw_cpu else f"{'-':>12}"
        print(
            f"{m:<7}{med:>9.3f}{min(wall[m]):>8.3f}{2 * size / med / 1e9:>7.2f}{frac}{c:>8.3f}{cfrac}"
        )
    print(
        "  (of raw: raw time / mode time, medians; cpu s: both processes' CPU per exchange;"
        " cpu of raw: raw CPU / mode CPU)"
    )
    print(
        f"latency, {args.latency_params:,} float32 ({4 * args.latency_params / 1e3:.0f} KB) "
        f"push-pull via HttpTransport, {args.latency_reps} reps: "
        f"median {statistics.median(lat) * 1e3:.2f} ms, p90 {pct(lat, 0.9) * 1e3:.2f} ms"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
