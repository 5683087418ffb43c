#!/usr/bin/env python
"""What the swarm page costs a peer's training: steps/s with 0 viewers against 10 viewers.

    .venv/bin/python scripts/bench/compute/dashboard.py          # 10 viewers, 12 pairs of 4 s
    .venv/bin/python scripts/bench/compute/dashboard.py --pairs 20 --json out.json
    # no exchange:
    .venv/bin/python scripts/bench/compute/dashboard.py --peer-args "--sync-every 100000000"

One real peer (`swarmnode start`, the default model and data, full speed) and `--others` peers
that join it, paced (`--step-time`) so that they cost the box little but give the page's fan-out
members to ask and the peer exchanges to run. Then, in the same run, windows alternate: none
watching, then `--viewers` Server-Sent-Event streams of the peer's page open (`GET /v1/watch`,
read and dropped, as a browser tab would; each stream makes the peer fetch the others' figures
once a second, shared by all viewers), the order swapped every pair. Each window's steps/s come
from the peer's own step counter (`/v1/status` at both ends; one request per window either way).
A second after the viewers connect is left out of the window (the hello frame).

Prints each window (with the CPU the peer's event loop used, from /proc: the page's work runs
there, and under the GIL it is what it can take from training), the median steps/s of each arm
and the median of the pairs' ratios viewed / none (the target: at least 0.98). Short windows,
many pairs, their order swapped: other processes' load drifts over seconds, and a pair's two
windows see about the same. Timings on a shared box are noisy: compare ratios of one run only.
With `--peer-args "--sync-every 100000000"` the peers run no exchange: the event loop then does
little but the page, and its CPU is the page's cost alone.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import aiohttp
from swarmnode.fault.chaos.processes import PeerProcess, start_peer

SETTLE_S = 1.0  # after the viewers connect (or leave), before a window starts


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--viewers", type=int, default=10, help="streams open in a viewed window")
    p.add_argument("--pairs", type=int, default=12, help="pairs of windows (none, viewed)")
    p.add_argument("--window", type=float, default=4.0, help="seconds per window")
    p.add_argument("--others", type=int, default=2, help="paced peers that join the measured one")
    p.add_argument("--step-time", type=float, default=0.05, help="the others' seconds per step")
    p.add_argument("--peer-args", default="", help="extra `swarmnode start` flags, all peers")
    p.add_argument("--json", metavar="PATH", help="also write the figures as JSON here")
    return p.parse_args(argv)


async def status(http: aiohttp.ClientSession, addr: str) -> dict[str, Any]:
    async with http.get(f"http://{addr}/v1/status") as r:
        return await r.json()


def loop_cpu_s(pid: int) -> float | None:
    """CPU seconds the peer's main thread (its event loop: HTTP, the page) has used; None off
    Linux. Its training runs on another thread."""
    try:
        fields = Path(f"/proc/{pid}/task/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime + stime


async def step_rate(
    http: aiohttp.ClientSession, addr: str, seconds: float, pid: int
) -> tuple[float, float | None]:
    """(steps/s, the event loop's CPU ms/s) over `seconds`."""
    s0, c0 = (await status(http, addr))["self"]["step"], loop_cpu_s(pid)
    t0 = time.monotonic()
    await asyncio.sleep(seconds)
    s1, c1 = (await status(http, addr))["self"]["step"], loop_cpu_s(pid)
    dt = time.monotonic() - t0
    return (s1 - s0) / dt, None if c0 is None or c1 is None else 1000 * (c1 - c0) / dt


async def viewer(http: aiohttp.ClientSession, addr: str, frames: list[int]) -> None:
    """One open page: read the stream until cancelled, counting frames."""
    async with http.get(f"http://{addr}/v1/watch") as r:
        if r.status != 200:
            raise RuntimeError(f"/v1/watch answered {r.status}")
        async for line in r.content:
            if line.startswith(b"data: "):
                frames[0] += 1


async def viewed_window(
    http: aiohttp.ClientSession, addr: str, n: int, seconds: float, pid: int
) -> tuple[float, float | None, float]:
    frames = [0]
    tasks = [asyncio.create_task(viewer(http, addr, frames)) for _ in range(n)]
    try:
        await asyncio.sleep(SETTLE_S)
        counted = frames[0]
        rate, cpu = await step_rate(http, addr, seconds, pid)
        got = frames[0] - counted
        for t in tasks:
            if t.done():
                t.result()  # a viewer that failed: say why
        return rate, cpu, got / seconds / n
    finally:
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


async def measure(args: argparse.Namespace, addr: str, pid: int) -> dict[str, Any]:
    timeout = aiohttp.ClientTimeout(total=None, sock_connect=5)
    connector = aiohttp.TCPConnector(limit=args.viewers + 4)
    rows = []
    async with aiohttp.ClientSession(timeout=timeout, connector=connector) as http:
        await asyncio.sleep(2.0)  # the others' joins, the first evaluations
        for pair in range(args.pairs):
            order = ("none", "viewed") if pair % 2 == 0 else ("viewed", "none")
            for arm in order:
                if arm == "none":
                    await asyncio.sleep(SETTLE_S)
                    (rate, cpu), fps = await step_rate(http, addr, args.window, pid), 0.0
                else:
                    rate, cpu, fps = await viewed_window(http, addr, args.viewers, args.window, pid)
                rows.append(
                    {
                        "pair": pair,
                        "arm": arm,
                        "steps_per_s": rate,
                        "loop_cpu_ms_per_s": cpu,
                        "frames_per_s": fps,
                    }
                )
                loop = "-" if cpu is None else f"{cpu:5.1f}"
                extra = f"  {fps:.2f} frames/s per viewer" if arm == "viewed" else ""
                print(
                    f"pair {pair}  {arm:6s}  {rate:9.1f} steps/s  event loop {loop} ms CPU/s{extra}",
                    flush=True,
                )
        members = len((await status(http, addr))["members"])
    none = [r["steps_per_s"] for r in rows if r["arm"] == "none"]
    viewed = [r["steps_per_s"] for r in rows if r["arm"] == "viewed"]
    pair_ratios = [v / n for n, v in zip(none, viewed, strict=True) if n > 0]
    cpu = {
        arm: statistics.median(c)
        if (c := [r["loop_cpu_ms_per_s"] for r in rows if r["arm"] == arm]) and None not in c
        else None
        for arm in ("none", "viewed")
    }
    return {
        "viewers": args.viewers,
        "members_besides": members,
        "window_s": args.window,
        "median_none": statistics.median(none),
        "median_viewed": statistics.median(viewed),
        "ratio_of_medians": statistics.median(viewed) / statistics.median(none),
        "ratio": statistics.median(pair_ratios),
        "pair_ratios": pair_ratios,
        "loop_cpu_ms_per_s": cpu,
        "windows": rows,
    }


def start(workdir: Path, name: str, extra: list[str]) -> PeerProcess:
    args = ["--steps", "0", "--name", name, "--checkpoint-dir", str(workdir / name / "ckpt")]
    return start_peer([*args, *extra], workdir, name)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    extra = args.peer_args.split()
    with tempfile.TemporaryDirectory(prefix="bench-dashboard-") as tmp:
        workdir = Path(tmp)
        procs: list[PeerProcess] = []
        try:
            peer = start(workdir, "measured", extra)
            procs.append(peer)
            peer.wait_ready(time.monotonic() + 60)
            paced = [*extra, "--step-time", str(args.step_time), "--join", str(peer.addr)]
            procs += [start(workdir, f"other{i}", paced) for i in range(args.others)]
            for p in procs[1:]:
                p.wait_ready(time.monotonic() + 60)
            print(
                f"measured peer {peer.addr}; {args.others} paced peers; {args.viewers} viewers; "
                f"{args.pairs} pairs of {args.window:g} s windows",
                flush=True,
            )
            result = asyncio.run(measure(args, str(peer.addr), peer.pid))
        finally:
            for p in procs:
                with contextlib.suppress(Exception):
                    p.stop(grace=5.0)
    print(
        f"median steps/s: none {result['median_none']:.1f}, {args.viewers} viewers "
        f"{result['median_viewed']:.1f} (ratio {result['ratio_of_medians']:.3f}); median of the "
        f"pairs' ratios viewed/none {result['ratio']:.3f} "
        f"(pairs: {', '.join(f'{r:.3f}' for r in result['pair_ratios'])})"
    )
    cpu = result["loop_cpu_ms_per_s"]
    if cpu["none"] is not None:
        print(
            f"the peer's event loop: {cpu['none']:.1f} ms CPU/s with none watching, "
            f"{cpu['viewed']:.1f} with {args.viewers} viewers"
        )
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
