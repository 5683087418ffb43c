#!/usr/bin/env python
"""A slow partner costs at most its grace (issue 31, goal 4): 3 honest peers + 1 slow one
against 4 honest peers, in the same run, real `swarmnode start` processes on 127.0.0.1.

    .venv/bin/python scripts/bench/robust/slow_partner.py                 # 30 s per arm, 1.8 s slow
    .venv/bin/python scripts/bench/robust/slow_partner.py --window 10 --slow-ms 1800   # a smoke
    .venv/bin/python scripts/bench/robust/slow_partner.py --together   # both swarms at once
    .venv/bin/python scripts/bench/robust/slow_partner.py --together --robust median   # pull rounds

The slow member answers every push-pull correctly, but after `--slow-ms`: it listens on a port
of its own and advertises the port of a small TCP relay in this process that holds every byte
the others send it for that long before passing it on (its answers, and its own requests to the
others, are not delayed: a box that is slow to serve, or a link slow one way). Its status is
read past the relay. The peers are held at start (200x slowdown) and released together with a
fixed step time (`--step-s`), so that the two arms train at the same pace whatever else runs on
the box, then measured over `--window` seconds after `--warmup`. On a shared box whose load
changes by the minute, `--together` runs the two swarms at the same time (8 processes), so that
both arms see the same load.

Per arm it prints the honest peers' mean rounds/s (applied), steps/s and utilization (1 - the
share of the window held at the step limit) and the slow member's, and the ratio of the slow
arm's honest figures to the all-honest arm's: the goal is >= 0.90 for rounds and utilization,
with the slow member still applying rounds. `--robust RULE` runs both swarms in robust mode
with a rule that pulls (median, trimmed-mean: f = 1 needs 3 models, so each peer pulls 3 and a
round without the slow one still has enough), where the slow member serves its pulls late.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import socket
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

from tests.integration.peers import HOLD, Peer, set_slowdown

SWARM = ["--sync-every", "10", "--group", "3", "--steps", "0", "--eval-every", "200"]


class DelayRelay:
    """127.0.0.1:`port` -> 127.0.0.1:`target`, each byte towards the target held `delay` s
    (order kept); the answers pass at once. Runs its own event loop in a thread."""

    def __init__(self, target: int, delay: float) -> None:
        self.target, self.delay = target, delay
        self.port = 0
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> DelayRelay:
        self._thread.start()
        self._ready.wait(10)
        return self

    def stop(self) -> None:
        asyncio.run_coroutine_threadsafe(self._shutdown(), self._loop).result(5)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(5)

    async def _shutdown(self) -> None:
        """Every connection's tasks ended (the peers are gone by now)."""
        me = asyncio.current_task()
        tasks = [t for t in asyncio.all_tasks() if t is not me]
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        server = self._loop.run_until_complete(asyncio.start_server(self._serve, "127.0.0.1", 0))
        self.port = server.sockets[0].getsockname()[1]
        self._ready.set()
        self._loop.run_forever()

    async def _serve(self, cr: asyncio.StreamReader, cw: asyncio.StreamWriter) -> None:
        try:
            sr, sw = await asyncio.open_connection("127.0.0.1", self.target)
        except OSError:
            cw.close()
            return
        queue: asyncio.Queue[tuple[float, bytes]] = asyncio.Queue()

        async def take() -> None:  # what the client sends, stamped with when it may go on
            while data := await cr.read(1 << 16):
                queue.put_nowait((time.monotonic() + self.delay, data))
            queue.put_nowait((time.monotonic() + self.delay, b""))

        async def forward() -> None:  # ... and goes on then, in order
            while True:
                due, data = await queue.get()
                await asyncio.sleep(max(0.0, due - time.monotonic()))
                if not data:
                    with contextlib.suppress(OSError):
                        sw.write_eof()
                    return
                sw.write(data)
                await sw.drain()

        async def back() -> None:
            while data := await sr.read(1 << 16):
                cw.write(data)
                await cw.drain()
            cw.close()

        try:
            await asyncio.gather(take(), forward(), back())
        except (OSError, ConnectionError, asyncio.CancelledError):
            pass  # a peer gone, or the relay's own shutdown (`_shutdown`): nothing to report
        finally:
            for w in (cw, sw):
                w.close()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Reading:
    t: float
    steps: int
    applied: int
    waited_s: float


def read(peer: Peer) -> Reading:
    s: dict[str, Any] = peer.status(timeout=5.0)["self"]
    return Reading(time.monotonic(), int(s["step"]), int(s["exchange"]["applied"]), s["waited_s"])


def rates(a: Reading, b: Reading) -> tuple[float, float, float]:
    """(rounds applied / s, steps / s, utilization) over the window a..b."""
    dt = b.t - a.t
    util = 1.0 - min(1.0, (b.waited_s - a.waited_s) / dt)
    return (b.applied - a.applied) / dt, (b.steps - a.steps) / dt, util


def mode_flags(robust: str | None) -> list[str]:
    """The exchange flags of both arms: push-pull groups, or pull rounds of a robust rule."""
    if robust is None:
        return []
    return ["--exchange", "robust", "--aggregator", robust, "--pull", "3", "--byzantine-f", "1"]


def run_arm(workdir: Path, slow_ms: float, args: argparse.Namespace) -> dict[str, Any]:
    """One swarm of 4 (p3 slow when `slow_ms` > 0): the window's figures per peer."""
    common = [*SWARM, *mode_flags(args.robust), *HOLD, "--model", args.model]
    relay = None
    peers = [Peer(workdir, "p0", *common).start(90)]
    try:
        for i in (1, 2):
            peers.append(Peer(workdir, f"p{i}", *common, "--join", peers[0].addr).launch())
        extra: list[str] = []
        if slow_ms > 0:
            own = free_port()
            relay = DelayRelay(own, slow_ms / 1000).start()
            extra = ["--listen", f"127.0.0.1:{own}", "--advertise", f"127.0.0.1:{relay.port}"]
        peers.append(Peer(workdir, "p3", *common, "--join", peers[0].addr, *extra).launch())
        for p in peers[1:]:
            p.wait_ready(90)
        if relay is not None:  # the bench reads and paces it past the relay
            peers[3].addr = f"127.0.0.1:{relay.target}"
        set_slowdown(peers, 1.0, args.step_s)
        time.sleep(args.warmup)
        first = [read(p) for p in peers]
        time.sleep(args.window)
        last = [read(p) for p in peers]
        tails = {p.name: p.tail(200) for p in peers}
    finally:
        for p in peers:
            p.stop()
        if relay is not None:
            relay.stop()
    figures = [rates(a, b) for a, b in zip(first, last, strict=True)]
    return {"figures": figures, "tails": tails}


def mean(xs: list[float]) -> float:
    return sum(xs) / len(xs)


def problems(tails: dict[str, str]) -> list[str]:
    return [
        f"{name}: {line}"
        for name, tail in tails.items()
        for line in tail.splitlines()
        if " WARNING " in line or " ERROR " in line
    ]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--slow-ms", type=float, default=1800.0)
    ap.add_argument("--window", type=float, default=30.0)
    ap.add_argument("--warmup", type=float, default=8.0)
    ap.add_argument("--step-s", type=float, default=0.01, help="fixed step time of every peer")
    ap.add_argument("--model", default="mlp:32")
    ap.add_argument("--together", action="store_true", help="run both swarms at the same time")
    ap.add_argument(
        "--robust",
        metavar="RULE",
        choices=("median", "trimmed-mean"),
        help="robust mode with this pull rule (f = 1, 3 pulled) instead of push-pull groups",
    )
    args = ap.parse_args()
    load = subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()
    print(f"uptime: {load}; exchange: {args.robust or 'average'}")
    arms = {"4 honest": 0.0, f"3 honest + 1 slow ({args.slow_ms:.0f} ms)": args.slow_ms}
    rows = {}
    with tempfile.TemporaryDirectory(prefix="slow-partner-") as tmp:

        def arm(label: str) -> dict[str, Any]:
            return run_arm(Path(tmp) / ("slow" if arms[label] else "honest"), arms[label], args)

        if args.together:
            with ThreadPoolExecutor(len(arms)) as pool:
                outs = dict(zip(arms, pool.map(arm, arms), strict=True))
        else:
            outs = {label: arm(label) for label in arms}
        for label, out in outs.items():
            rows[label] = out["figures"]
            for line in problems(out["tails"])[:10]:
                print(f"  [{label}] {line}")
    print(f"uptime: {subprocess.run(['uptime'], capture_output=True, text=True).stdout.strip()}")
    print(f"\n{'swarm':38} {'honest rounds/s':>15} {'steps/s':>8} {'util':>5}   "
          f"{'p3 rounds/s':>11} {'steps/s':>8} {'util':>5}")  # fmt: skip
    means = {}
    for label, figs in rows.items():
        honest = figs[:3]
        h = [mean([f[i] for f in honest]) for i in range(3)]
        means[label] = h
        s = figs[3]
        print(
            f"{label:38} {h[0]:15.2f} {h[1]:8.1f} {h[2]:5.2f}   {s[0]:11.2f} {s[1]:8.1f} {s[2]:5.2f}"
        )
    base, slow = means.values()
    print(f"\nslow arm / honest arm: rounds {slow[0] / max(base[0], 1e-9):.2f}, "
          f"steps {slow[1] / max(base[1], 1e-9):.2f}, utilization {slow[2] / max(base[2], 1e-9):.2f}")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
