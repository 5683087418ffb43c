#!/usr/bin/env python
"""The cost of `swarmnode.Swarm.step()` in a user's loop, and the memory a round takes.

    .venv/bin/python scripts/bench/swarm_step.py             # 1M parameters, 200k calls
    .venv/bin/python scripts/bench/swarm_step.py --size 4000000 --calls 100000

In one run: the time per `step()` call when no round is due (a Swarm alone: each call counts,
and every `sync_every`-th wakes the exchange), against an empty Python call and against a 10 ms
training step (issue 33's bound: < 1% of it); the time of a step that lands a mix (one pass
over the model and the finiteness checks); and tracemalloc's peak over rounds of two Swarms in
this process (background threads included), in model copies above what was live before.
"""

from __future__ import annotations

import argparse
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


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--size", type=int, default=1_000_000, help="parameters")
    p.add_argument("--calls", type=int, default=200_000)
    p.add_argument("--sync-every", type=int, default=10)
    p.add_argument("--round-steps", type=int, default=100, help="steps of the memory run")
    args = p.parse_args(argv)
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
    return 0 if cost["step"] < 0.01 * STEP_S else 1


if __name__ == "__main__":
    raise SystemExit(main())
