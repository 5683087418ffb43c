#!/usr/bin/env python
"""The cost of `swarmnode.Swarm.step()` in a user's loop, and the memory a round takes.

    .venv/bin/python scripts/bench/compute/swarm_step.py             # 1M parameters, 200k calls
    .venv/bin/python scripts/bench/compute/swarm_step.py --size 4000000 --calls 100000

In one run: the time per `step()` call when no round is due (a Swarm alone: each call counts,
and every `sync_every`-th wakes the exchange), against an empty Python call and against a 10 ms
training step (issue 33's bound: < 1% of it); the time of a step that lands a mix (one pass
over the model and the finiteness checks); and the memory of rounds, traced (tracemalloc,
background threads included), in model copies, two ways:

- two Swarms in this process, the peak above what was live after a warm-up (the figure of
  earlier runs: it counts both peers' buffers, and not the ones kept from the warm-up);
- one peer per process (this one founds, a child process joins: `--child ADDR`), each traced
  from before its Swarm started, so that everything the swarm holds counts (its state too:
  the pending-mix accumulator, the outer step's anchor, momentum and scratch, the consensus),
  with the allocations live at the high-water mark grouped by where they were made.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import threading
import time
import tracemalloc

import numpy as np

import swarmnode

STEP_S = 0.010  # the training step the cost is compared with


def per_call(fn, calls: int) -> float:
    t0 = time.perf_counter()
    for _ in range(calls):
        fn()
    return (time.perf_counter() - t0) / calls


def _empty() -> None:
    pass


def step_cost(size: int, calls: int, sync_every: int) -> dict[str, float]:
    x = np.zeros(size, np.float32)
    with swarmnode.Swarm(x, sync_every=sync_every) as swarm:
        swarm.step()  # binds the thread
        empty = per_call(_empty, calls)
        step = per_call(swarm.step, calls)
        worker = swarm._own_worker()
        y = np.ones(size, np.float32)
        landings = []
        for _ in range(20):
            worker.mix(y, 0.5)
            t0 = time.perf_counter()
            swarm.step()
            landings.append(time.perf_counter() - t0)
    return {"empty": empty, "step": step, "landing": float(np.median(landings))}


def round_memory(size: int, steps: int, sync_every: int) -> dict[str, float]:
    """Peak traced bytes over `steps` steps of two Swarms exchanging, in model copies."""
    x = np.zeros(size, np.float32)
    y = np.ones(size, np.float32)
    with swarmnode.Swarm(x, sync_every=sync_every) as a:
        with swarmnode.Swarm(y, join=a, sync_every=sync_every) as b:

            def loop(swarm, v, n):
                for _ in range(n):
                    v *= np.float32(0.999)
                    swarm.step()
                    time.sleep(0.002)

            def both(n):
                ts = [threading.Thread(target=loop, args=(s, v, n)) for s, v in ((a, x), (b, y))]
                for t in ts:
                    t.start()
                for t in ts:
                    t.join()

            both(4 * sync_every)  # warm: the accumulators and the outer step's buffers exist
            rounds = a.rounds + b.rounds
            tracemalloc.start()
            base, _ = tracemalloc.get_traced_memory()
            both(steps)
            _, peak = tracemalloc.get_traced_memory()
            tracemalloc.stop()
            rounds = a.rounds + b.rounds - rounds
    model = size * 4
    return {"peak_copies": (peak - base) / model, "rounds": rounds, "model_mb": model / 1e6}


def _site(trace: tracemalloc.Trace) -> str:
    """Where a buffer was made: the two innermost frames of this project's code."""
    ours = [f for f in trace.traceback if "site-packages" not in f.filename
            and "/lib/python" not in f.filename and f.filename != __file__]  # fmt: skip
    tail = ours[-2:][::-1] if ours else list(trace.traceback)[-1:]
    return " <- ".join(f"{'/'.join(f.filename.split('/')[-2:])}:{f.lineno}" for f in tail)


class HighWater:
    """tracemalloc's peak, and a snapshot taken as the traced memory climbs to it."""

    def __init__(self, model_bytes: int) -> None:
        self.model = model_bytes
        self.best = 0
        self.snapshot: tracemalloc.Snapshot | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._poll, daemon=True)

    def start(self) -> HighWater:
        tracemalloc.start(30)
        self._thread.start()
        return self

    def rounds_from_here(self) -> float:
        """The peak so far (the start, the join) in model copies; the peak starts again."""
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.reset_peak()
        self.best, self.snapshot = tracemalloc.get_traced_memory()[0], None
        return peak / self.model

    def _poll(self) -> None:
        while not self._stop.is_set():
            cur, _ = tracemalloc.get_traced_memory()
            if cur > self.best + self.model // 8:  # a new model-sized buffer: look at it
                self.best = cur
                self.snapshot = tracemalloc.take_snapshot()
            time.sleep(0.0005)

    def stop(self) -> dict:
        self._stop.set()
        self._thread.join()
        _, peak = tracemalloc.get_traced_memory()
        sites: dict[str, float] = {}
        for t in self.snapshot.traces if self.snapshot is not None else []:
            if t.size >= self.model // 8:
                sites[_site(t)] = sites.get(_site(t), 0.0) + t.size / self.model
        tracemalloc.stop()
        return {"peak_copies": peak / self.model, "sites": sites}


def _paced(swarm: swarmnode.Swarm, v: np.ndarray, n: int) -> None:
    for _ in range(n):
        v *= np.float32(0.999)
        swarm.step()
        time.sleep(0.002)


def one_peer(
    size: int, steps: int, sync_every: int, join: str | None, share: bool, partner=None
) -> dict:
    """One peer, traced from before its Swarm: its peak and the buffers live at it. The
    founder (`partner`: starts the joiner's process, returns it) steps on until the joiner
    has ended, so that every round of the joiner's finds it."""
    v = np.full(size, 0.0 if join is None else 1.0, np.float32)  # the user's: not counted
    water = HighWater(4 * size).start()
    with swarmnode.Swarm(v, join=join, sync_every=sync_every) as swarm:
        store = swarm._peer().store
        store.share_frames = share  # off: a fresh frame for every request (before)
        child = partner(swarm) if partner is not None else None
        deadline = time.monotonic() + 300  # a loaded box starts a process slowly
        while not swarm.live_peers() and time.monotonic() < deadline:
            time.sleep(0.05)
        joined = water.rounds_from_here()  # the join's state sync is not a round
        _paced(swarm, v, steps)
        while child is not None and child.poll() is None:
            _paced(swarm, v, sync_every)
        rounds, shared = swarm.rounds, store.frames_shared
        out = water.stop()
    out["rounds"], out["shared"], out["join_copies"] = rounds, shared, joined
    return out


def per_process(size: int, steps: int, sync_every: int, share: bool) -> list[dict]:
    """This process founds, a child joins; each reports its own figures."""
    child: list[subprocess.Popen[str]] = []
    reply: list[str] = []
    readers: list[threading.Thread] = []

    def spawn(swarm: swarmnode.Swarm) -> subprocess.Popen[str]:
        args = [sys.executable, __file__, "--child", swarm.addr, "--size", str(size),
                "--round-steps", str(steps), "--sync-every", str(sync_every),
                *([] if share else ["--no-share"])]  # fmt: skip
        child.append(subprocess.Popen(args, stdout=subprocess.PIPE, text=True))
        # read its one line as it comes: a full pipe would hold it
        readers.append(threading.Thread(target=lambda: reply.append(child[0].stdout.read())))
        readers[0].start()
        return child[0]

    try:
        mine = one_peer(size, steps, sync_every, None, share, partner=spawn)
    finally:
        for c in child:
            if c.poll() is None:
                c.kill()
            c.wait()
        for r in readers:
            r.join()
    lines = reply[0].strip().splitlines() if reply else []
    if not lines:
        raise RuntimeError("the joining process reported nothing (its error is above)")
    return [mine, json.loads(lines[-1])]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--size", type=int, default=1_000_000, help="parameters")
    p.add_argument("--calls", type=int, default=200_000)
    p.add_argument("--sync-every", type=int, default=10)
    p.add_argument("--round-steps", type=int, default=100, help="steps of the memory run")
    p.add_argument("--child", default=None, help=argparse.SUPPRESS)  # ADDR: the joining peer
    p.add_argument("--no-share", action="store_true", help=argparse.SUPPRESS)  # the child's
    args = p.parse_args(argv)
    if args.child:
        share = not args.no_share
        print(json.dumps(one_peer(args.size, args.round_steps, args.sync_every, args.child, share)))
        return 0
    cost = step_cost(args.size, args.calls, args.sync_every)
    extra = cost["step"] - cost["empty"]
    print(f"empty Python call      {cost['empty'] * 1e9:8.0f} ns")
    print(f"Swarm.step(), no round {cost['step'] * 1e9:8.0f} ns  "
          f"({cost['step'] / STEP_S:.4%} of a 10 ms step; {extra * 1e9:.0f} ns above empty)")  # fmt: skip
    print(f"a step landing a mix   {cost['landing'] * 1e3:8.2f} ms  "
          f"({args.size:,} parameters: one pass + two finiteness checks)")  # fmt: skip
    mem = round_memory(args.size, args.round_steps, args.sync_every)
    print(f"round memory peak      {mem['peak_copies'] / 2:8.2f} model copies per peer above the "
          f"live set ({mem['model_mb']:.0f} MB model; two peers in this process, "
          f"{mem['rounds']} rounds, each serving the other's pushes too; traced)")  # fmt: skip
    for share in (False, True):  # before and after: a fresh frame per request, or shared
        peers = per_process(args.size, args.round_steps, args.sync_every, share)
        print(
            f"one peer a process, frames {'shared while in flight' if share else 'never shared'}:"
        )
        for name, peer in zip(("founder", "joiner"), peers, strict=True):
            print(f"  {name:7s} {peer['peak_copies']:5.2f} model copies at the rounds' peak, all "
                  f"the swarm holds ({peer['rounds']} rounds, {peer['shared']} frames shared; "
                  f"the start and join: {peer['join_copies']:.2f}); live at the high water:")  # fmt: skip
            for site, n in sorted(peer["sites"].items(), key=lambda kv: -kv[1]):
                print(f"      {n:5.2f}  {site}")
    return 0 if cost["step"] < 0.01 * STEP_S else 1


if __name__ == "__main__":
    raise SystemExit(main())
