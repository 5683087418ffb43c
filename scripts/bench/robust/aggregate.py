#!/usr/bin/env python
"""Krum (and the other aggregation rules) on realistic sizes, against a scipy-cdist Krum.

    .venv/bin/python scripts/bench/robust/aggregate.py                   # cpu: n=64, d=1e6
    .venv/bin/python scripts/bench/robust/aggregate.py --blas-threads 1  # pin BLAS to one thread
    .venv/bin/python scripts/bench/robust/aggregate.py --device cuda     # n=32, d=25e6 on a GPU

Rows are near-identical (a shared base plus noise at 1e-4 of its scale), as peers' models are.
CPU targets: Krum <= 0.2 s and >= 10x faster than `scipy.spatial.distance.cdist` + the same
score. GPU: Krum's time next to the time it takes just to read the (n, d) matrix once at the
bandwidth measured on the device (a device-to-device copy moves 2 bytes per byte read).

`--blas-threads` sets OPENBLAS/OMP/MKL thread counts before numpy loads. On a 2-core box shared
with other work, OpenBLAS's spinning threads can make a 2-thread GEMM several times slower than a
1-thread one, so the default (BLAS's own choice) is worth comparing against 1.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    p.add_argument("--n", type=int, default=None, help="rows (default 64 cpu, 32 cuda)")
    p.add_argument("--d", type=float, default=None, help="columns (default 1e6 cpu, 25e6 cuda)")
    p.add_argument("--f", type=int, default=None, help="byzantine rows tolerated (default n//4)")
    p.add_argument("--repeats", type=int, default=7, help="timed runs per rule (median reported)")
    p.add_argument("--blas-threads", type=int, default=None)
    p.add_argument("--all-rules", action="store_true", help="also time the other rules")
    args = p.parse_args(argv)
    if args.blas_threads is not None:  # must happen before numpy is imported
        for var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
            os.environ[var] = str(args.blas_threads)
    if args.device == "cuda":
        return bench_cuda(args)
    return bench_cpu(args)


def timed(fn: Callable[[], Any], repeats: int, sync: Callable[[], None] = lambda: None) -> float:
    """Median wall time of `repeats` calls after one warm-up call."""
    fn()
    sync()
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        sync()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def make_rows(xp: Any, n: int, d: int) -> Any:
    rng = xp.random.default_rng(0) if hasattr(xp.random, "default_rng") else xp.random
    base = rng.standard_normal(d, dtype=xp.float32)
    X = xp.empty((n, d), dtype=xp.float32)
    for i in range(n):  # row by row: no (n, d) float64 temporary
        X[i] = base + xp.float32(1e-4) * rng.standard_normal(d, dtype=xp.float32)
    return X


def cdist_krum(X: Any, f: int) -> int:
    import numpy as np
    from scipy.spatial.distance import cdist

    D = cdist(X, X, "sqeuclidean")
    np.fill_diagonal(D, np.inf)
    k = X.shape[0] - f - 2
    return int(np.argmin(np.sort(D, axis=1)[:, :k].sum(axis=1)))


def bench_cpu(args: argparse.Namespace) -> int:
    import numpy as np
    from swarmnode.gossip.robust.aggregate import RULES, krum_select

    n, d = args.n or 64, int(args.d or 1e6)
    f = args.f if args.f is not None else n // 4
    X = make_rows(np, n, d)
    threads = os.environ.get("OPENBLAS_NUM_THREADS", "default")
    print(f"cpu: n={n} d={d} f={f} float32, BLAS threads={threads}, {os.cpu_count()} cores")
    ours = timed(lambda: RULES["krum"](X, f), args.repeats)
    ref = timed(lambda: cdist_krum(X, f), max(1, args.repeats // 3))
    agree = krum_select(X, f) == cdist_krum(X, f)
    rows = [("krum (ours)", ours, "target <= 0.200 s"), ("krum (scipy cdist)", ref, "")]
    if args.all_rules:
        for name in ("multi-krum", "median", "trimmed-mean", "centered-clip", "mean"):
            rows.append((name, timed(lambda name=name: RULES[name](X, f), 3), ""))
    _table(rows)
    speedup = ref / ours
    print(f"speed-up over cdist: {speedup:.1f}x (target >= 10x); same row chosen: {agree}")
    ok = ours <= 0.2 and speedup >= 10 and agree
    print("PASS" if ok else "MISS")
    return 0 if ok else 1


def bench_cuda(args: argparse.Namespace) -> int:
    try:
        import cupy
    except ImportError:
        print("--device cuda needs cupy", file=sys.stderr)
        return 2
    if cupy.cuda.runtime.getDeviceCount() == 0:
        print("--device cuda: no CUDA device", file=sys.stderr)
        return 2
    from swarmnode.gossip.robust.aggregate import RULES, krum_select

    n, d = args.n or 32, int(args.d or 25e6)
    f = args.f if args.f is not None else n // 4
    X = make_rows(cupy, n, d)
    sync = cupy.cuda.Device().synchronize
    nbytes = X.nbytes
    copy_s = _copy_time(cupy, X, args.repeats, sync)
    bandwidth = 2 * nbytes / copy_s  # a copy reads and writes every byte
    read_once = nbytes / bandwidth
    props = cupy.cuda.runtime.getDeviceProperties(cupy.cuda.Device().id)
    name = props["name"].decode() if isinstance(props["name"], bytes) else props["name"]
    print(f"cuda: {name}; n={n} d={d} f={f} float32 ({nbytes / 1e9:.2f} GB)")
    print(f"measured device bandwidth {bandwidth / 1e9:.0f} GB/s (copy of the matrix)")
    ours = timed(lambda: RULES["krum"](X, f), args.repeats, sync)
    rows = [("read (n, d) once", read_once, "lower bound"), ("krum (ours)", ours, "")]
    if args.all_rules:
        for name in ("multi-krum", "median", "trimmed-mean", "centered-clip", "mean"):
            rows.append((name, timed(lambda name=name: RULES[name](X, f), 3, sync), ""))
    _table(rows)
    print(f"krum / read-once: {ours / read_once:.1f}x")
    print(f"krum chose row {krum_select(X, f)}")
    return 0


def _copy_time(cupy: Any, X: Any, repeats: int, sync: Callable[[], None]) -> float:
    Y = cupy.empty_like(X)  # freed on return: Krum gets the memory back
    return timed(lambda: cupy.copyto(Y, X), repeats, sync)


def _table(rows: list[tuple[str, float, str]]) -> None:
    print(f"{'rule':<22}{'median time':>14}  note")
    print("-" * 56)
    for label, seconds, note in rows:
        print(f"{label:<22}{seconds * 1000:>11.1f} ms  {note}")


if __name__ == "__main__":
    sys.exit(main())
