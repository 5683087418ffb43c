#!/usr/bin/env python
"""Training throughput of one peer (samples/s) on the selected device.

    .venv/bin/python scripts/bench/compute/train.py                  # cpu, all cases
    .venv/bin/python scripts/bench/compute/train.py --device cuda    # needs cupy and a GPU

Each case builds the same Trainer `swarmnode start` uses, runs a few warm-up steps (allocations,
cupy kernel compilation), then times `--seconds` of steps. `Trainer.step()` returns the loss as a
Python float, which synchronises the device, so the wall time is honest on a GPU too.
"""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import dataclass

from swarmnode.kernels.errors import SwarmnodeError
from swarmnode.node.train.build import build_trainer
from swarmnode.node.train.config import NodeConfig


@dataclass(frozen=True)
class Case:
    label: str
    model: str
    data: str
    batch_size: int


CASES = [
    Case("digits mlp (default)", "mlp:512", "digits", 32),
    Case("digits mlp, batch 512", "mlp:512", "digits", 512),
    Case("synthetic large mlp", "mlp:1024,1024", "synthetic:8192,1024,10", 256),
]


def bench(case: Case, device: str, seconds: float, warmup: int = 5) -> tuple[int, float, str]:
    cfg = NodeConfig(model=case.model, data=case.data, batch_size=case.batch_size, device=device)
    trainer, _, backend = build_trainer(cfg.validate())
    for _ in range(warmup):
        trainer.step()
    steps = 0
    t0 = time.perf_counter()
    while (elapsed := time.perf_counter() - t0) < seconds or steps < 3:
        trainer.step()
        steps += 1
    return (
        int(trainer.model.params.data.size),
        steps * trainer.batch_size / elapsed,
        backend.describe(),
    )


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--device", default="cpu", help="cpu, cuda, cuda:N or auto")
    p.add_argument("--seconds", type=float, default=2.0, help="timed duration per case")
    p.add_argument("--only", default=None, help="run only cases whose label contains this text")
    args = p.parse_args(argv)
    rows = []
    for case in CASES:
        if args.only and args.only not in case.label:
            continue
        try:
            n_params, rate, device = bench(case, args.device, args.seconds)
        except SwarmnodeError as exc:
            print(f"bench_train: {case.label}: {exc}", file=sys.stderr)
            return 2
        rows.append((case.label, case.model, case.batch_size, n_params, rate, device))
    header = f"{'case':<24} {'model':<15} {'batch':>5} {'params':>10} {'samples/s':>12}  device"
    print(header)
    print("-" * len(header))
    for label, model, batch, n_params, rate, device in rows:
        print(f"{label:<24} {model:<15} {batch:>5} {n_params:>10,} {rate:>12,.0f}  {device}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
