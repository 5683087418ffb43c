"""Codec kernels' compress + decompress throughput against a plain memory copy, in one run.

    python scripts/bench_codecs.py [--n 5000000] [--repeat 5] [--json out.json]

Throughput counts the float32 bytes of the vector (4 n) per second of encode + decode; the
copy is `np.copyto` of the same 4 n bytes into a preallocated buffer, timed in the same run
(best of `--repeat`), so the ratio holds on a loaded machine too. Everything runs on one thread
(the copy, numpy's passes and NumKong's casts alike).
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable

import numpy as np
from swarmnode.kernels import compress


def best(fn: Callable[[], object], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=int, default=5_000_000)
    ap.add_argument("--repeat", type=int, default=15)
    ap.add_argument("--json", default="")
    args = ap.parse_args()
    x = np.random.default_rng(0).standard_normal(args.n).astype(np.float32)
    dst = np.empty_like(x)
    gb = x.nbytes / 1e9
    rows = {"copy": gb / best(lambda: np.copyto(dst, x), args.repeat)}
    for spec in ("fp16", "int8", "topk:0.01"):
        name, ratio = compress.parse_codec(spec)
        packed = compress.encode(x, name, ratio)
        enc = best(lambda n=name, r=ratio: compress.encode(x, n, r), args.repeat)
        dec = best(lambda p=packed: compress.decode(p, dst), args.repeat)
        rows[spec] = gb / (enc + dec)
        rows[spec + " bytes/value"] = packed.nbytes / args.n
    print(f"n = {args.n:,} float32 ({gb * 1000:.0f} MB)")
    for spec in ("fp16", "int8", "topk:0.01"):
        share = rows[spec] / rows["copy"]
        print(
            f"{spec:10s} {rows[spec]:6.2f} GB/s  {share:6.1%} of copy  "
            f"{rows[spec + ' bytes/value']:.3f} bytes/value"
        )
    print(f"{'copy':10s} {rows['copy']:6.2f} GB/s")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
