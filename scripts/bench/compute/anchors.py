#!/usr/bin/env python
"""swarmnode's CPU kernels side by side with PyTorch (CPU) and ByzFL, one BLAS thread each.

    python scripts/bench/compute/anchors.py                    # everything
    python scripts/bench/compute/anchors.py --only train,ops   # the conv net step and its layers
    python scripts/bench/compute/anchors.py --only aggregate --n 64 --d 1e6
    python scripts/bench/compute/anchors.py --only aggregate-numpy --n 8,16,64  # no anchor needed

torch and byzfl are benchmark anchors only, never runtime or test dependencies: a group whose
anchor does not import prints "anchor missing" and still times swarmnode alone.

Every figure is a ratio measured in the same run: each repeat times the anchor and swarmnode
back to back (the order alternating between repeats), and the reported ratio is the median over
repeats of anchor_time / swarmnode_time, so > 1.00 means swarmnode is faster. On a shared 2-core
box absolute times drift with the load; the interleaved ratio drifts much less.

Cases:
- train: one SGD step (momentum 0.9, lr 0.05) of `cnn1d:32k5,p2,64k3,p2,128` on 1-channel
  signals of length --length, batch 32 and 256, against the same architecture in torch
  (Conv1d 'same' padding, ReLU, MaxPool1d, Linear; cross-entropy; torch.optim.SGD).
- ops: max-pool (size 2) forward and forward+backward on (256, 32, L); ReLU backward on a conv
  layer's output, as the conv net produces it; against torch.nn.functional.
- aggregate: mean, median, trimmed mean, Krum, multi-Krum, centered clipping on n near-identical
  float32 rows of length d, against ByzFL's numpy aggregators (centered clipping: ByzFL's
  CenteredClipping has other semantics, so it is timed alone).
- aggregate-numpy: mean, median and trimmed mean against ByzFL's recipes written in plain numpy
  (np.mean axis 0; np.median axis 0; np.sort axis 0, then np.mean of the middle n - 2f rows), so
  it needs no anchor installed. "mean, before" is the float64-summing mean that issue 12's
  float32 change replaced, kept below as the baseline; "median/trimmed-mean, before" (n <= 24)
  turn off the min/max sorting network that change added, leaving the per-column sorts they used
  before. Each case also checks its result against the anchor's: the mean (and the anchor's
  own) within np.mean's float32 bound of the exact mean, (n - 1) u sum|x_i| / n + u |mean| with
  u = 2**-24; median equal; trimmed mean within 2 float32 ulps plus the anchor's float32 error.
"""

from __future__ import annotations

import argparse
import functools
import importlib.util
import os
import statistics
import sys
import time
import types
from collections.abc import Callable
from typing import Any

Timed = Callable[[], Any]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--only", default="train,ops,aggregate", help="comma-separated groups")
    p.add_argument("--repeats", type=int, default=7, help="interleaved repeats per case")
    p.add_argument("--length", type=int, default=32, help="signal length for the conv net")
    p.add_argument("--n", default="64", help="aggregation: rows (comma-separated: several runs)")
    p.add_argument("--d", type=float, default=1e6, help="aggregation: columns")
    p.add_argument("--f", type=int, default=None, help="aggregation: f (default n // 4)")
    args = p.parse_args(argv)
    for var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[var] = "1"  # before numpy (and torch) load their BLAS
    groups = set(args.only.split(","))
    print(f"{os.cpu_count()} cores, one BLAS/torch thread, {args.repeats} interleaved repeats")
    print(f"{'case':<44}{'swarmnode':>12}{'anchor':>12}{'ratio':>8}  (anchor/swarmnode)")
    if "train" in groups:
        bench_train(args)
    if "ops" in groups:
        bench_ops(args)
    if "aggregate" in groups:
        bench_aggregate(args)
    if "aggregate-numpy" in groups:
        bench_aggregate_numpy(args)
    return 0


# --- timing -----------------------------------------------------------------------------------


def _once(fn: Timed, inner: int) -> float:
    t0 = time.perf_counter()
    for _ in range(inner):
        fn()
    return (time.perf_counter() - t0) / inner


def compare(label: str, ours: Timed, anchor: Timed | None, repeats: int, inner: int = 1) -> None:
    """Print the median times and the median per-repeat ratio anchor / ours."""
    ours()
    if anchor is not None:
        anchor()
    t_ours, t_anchor, ratios = [], [], []
    for r in range(repeats):
        if anchor is None:
            t_ours.append(_once(ours, inner))
            continue
        if r % 2:  # alternate who goes first, so neither always runs on a warmer cache
            a, o = _once(anchor, inner), _once(ours, inner)
        else:
            o, a = _once(ours, inner), _once(anchor, inner)
        t_ours.append(o)
        t_anchor.append(a)
        ratios.append(a / o)
    mo = statistics.median(t_ours)
    if anchor is None:
        print(f"{label:<44}{_ms(mo):>12}{'missing':>12}{'-':>8}")
        return
    ratio = statistics.median(ratios)
    lo, hi = min(ratios), max(ratios)
    print(
        f"{label:<44}{_ms(mo):>12}{_ms(statistics.median(t_anchor)):>12}{ratio:>7.2f}x"
        f"  [{lo:.2f}-{hi:.2f}]"
    )


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:.3f} ms"


def _torch() -> Any:
    try:
        import torch
    except ImportError:
        print("torch anchor missing: timing swarmnode alone")
        return None
    torch.set_num_threads(1)
    return torch


# --- the conv net's training step -------------------------------------------------------------

SPEC = "cnn1d:32k5,p2,64k3,p2,128"


def bench_train(args: argparse.Namespace) -> None:
    import numpy as np
    from swarmnode.kernels.backend import CPU
    from swarmnode.kernels.optim import SGD
    from swarmnode.node.train.model.builtin import build_model

    torch = _torch()
    length = args.length
    for batch in (32, 256):
        rng = np.random.default_rng(0)
        x = rng.standard_normal((batch, length), dtype=np.float32)
        y = rng.integers(0, 10, batch)
        model = build_model(SPEC, (length,), 10, CPU, seed=0)
        opt = SGD(model.params, lr=0.05, momentum=0.9)

        def ours(model: Any = model, opt: Any = opt, x: Any = x, y: Any = y) -> None:
            model.loss_and_grad(x, y)
            opt.step()

        anchor = _torch_step(torch, length, x, y) if torch else None
        inner = 20 if batch == 32 else 4
        compare(f"{SPEC} step, L={length}, batch {batch}", ours, anchor, args.repeats, inner)


def _torch_step(torch: Any, length: int, x: Any, y: Any) -> Timed:
    nn = torch.nn
    net = nn.Sequential(
        nn.Conv1d(1, 32, 5, padding=2),
        nn.ReLU(),
        nn.MaxPool1d(2),
        nn.Conv1d(32, 64, 3, padding=1),
        nn.ReLU(),
        nn.MaxPool1d(2),
        nn.Flatten(),
        nn.Linear(64 * (length // 4), 128),
        nn.ReLU(),
        nn.Linear(128, 10),
    )
    opt = torch.optim.SGD(net.parameters(), lr=0.05, momentum=0.9)
    tx = torch.from_numpy(x[:, None, :].copy())
    ty = torch.from_numpy(y)

    def step() -> None:
        opt.zero_grad(set_to_none=False)
        loss = nn.functional.cross_entropy(net(tx), ty)
        loss.backward()
        opt.step()

    return step


# --- single layers ----------------------------------------------------------------------------


def bench_ops(args: argparse.Namespace) -> None:
    import numpy as np
    from swarmnode.kernels.layers import Conv1d, MaxPool1d, ReLU
    from swarmnode.kernels.model import Sequential

    torch = _torch()
    rng = np.random.default_rng(1)
    shape = (256, 32, args.length)
    x = rng.standard_normal(shape, dtype=np.float32)
    dy_pool = rng.standard_normal((*shape[:2], shape[2] // 2), dtype=np.float32)
    pool = MaxPool1d(2)
    tx = torch.from_numpy(x).requires_grad_() if torch else None
    tdy = torch.from_numpy(dy_pool) if torch else None
    F = torch.nn.functional if torch else None

    # Training-mode forward on both sides: ours records where each maximum was, torch (input
    # requiring grad) runs max_pool1d_with_indices. torch's no-grad path skips the indices.
    compare(
        f"maxpool2 forward (training) {shape}",
        lambda: pool.forward(x),
        (lambda: F.max_pool1d(tx, 2)) if torch else None,
        args.repeats,
        inner=10,
    )

    def pool_both() -> None:
        pool.forward(x)
        pool.backward(dy_pool)

    def torch_pool_both() -> None:
        F.max_pool1d(tx, 2).backward(tdy)

    compare(
        f"maxpool2 forward+backward {shape}",
        pool_both,
        torch_pool_both if torch else None,
        args.repeats,
        inner=10,
    )

    # ReLU backward on what our conv layer hands it (its own layout), against torch's
    # threshold_backward on a contiguous tensor of the same shape.
    conv = Sequential([Conv1d(32, 5)], (16, args.length), seed=0)
    h = conv.forward(rng.standard_normal((256, 16, args.length), dtype=np.float32))
    relu = ReLU()
    relu.forward(h)
    dy = rng.standard_normal(h.shape, dtype=np.float32)  # contiguous, as pool backward returns
    th = torch.from_numpy(np.ascontiguousarray(h)) if torch else None
    ty = F.relu(th) if torch else None
    tdy2 = torch.from_numpy(dy) if torch else None
    compare(
        f"relu backward on conv output {h.shape}",
        lambda: relu.backward(dy),
        (lambda: torch.ops.aten.threshold_backward(tdy2, ty, 0)) if torch else None,
        args.repeats,
        inner=10,
    )


# --- aggregation ------------------------------------------------------------------------------


def _rows(n: int, d: int) -> Any:
    """n near-identical float32 rows of length d, as peers' models are."""
    import numpy as np

    rng = np.random.default_rng(0)
    base = rng.standard_normal(d, dtype=np.float32)
    X = np.empty((n, d), dtype=np.float32)
    for i in range(n):
        X[i] = base + np.float32(1e-4) * rng.standard_normal(d, dtype=np.float32)
    return X


def _sizes(args: argparse.Namespace) -> list[tuple[int, int]]:
    """(n, f) for each n of --n; f is --f or n // 4."""
    ns = [int(v) for v in str(args.n).split(",")]
    return [(n, args.f if args.f is not None else n // 4) for n in ns]


def bench_aggregate(args: argparse.Namespace) -> None:
    from swarmnode.gossip.robust.aggregate import RULES

    d = int(args.d)
    for n, f in _sizes(args):
        X = _rows(n, d)
        anchors = _byzfl_anchors(f)
        print(f"aggregation: n={n} d={d} f={f} float32")
        for rule in ("mean", "median", "trimmed-mean", "krum", "multi-krum", "centered-clip"):
            anchor = anchors.get(rule)
            compare(
                f"{rule}",
                lambda rule=rule, X=X, f=f: RULES[rule](X, f),
                (lambda anchor=anchor, X=X: anchor(X)) if anchor else None,
                max(3, args.repeats // 2),
            )


def _byzfl_anchors(f: int) -> dict[str, Timed]:
    byzfl = _byzfl()
    if byzfl is None:
        print("byzfl anchor missing: timing swarmnode alone")
        return {}
    return {
        "mean": byzfl.Average(),
        "median": byzfl.Median(),
        "trimmed-mean": byzfl.TrMean(f=f),
        "krum": byzfl.Krum(f=f),
        "multi-krum": byzfl.MultiKrum(f=f),
    }


def _byzfl() -> Any:
    """byzfl's aggregators module, without the package __init__ when that fails to import.

    byzfl's __init__ imports its training harness and with it torchvision, which breaks when
    torchvision's build does not match the installed torch (seen with torch 2.13.0+cpu and
    torchvision 0.28.0); the aggregators themselves need only numpy, scipy and torch.
    """
    try:
        import byzfl

        return byzfl
    except ImportError:
        return None
    except Exception:  # whatever byzfl's own __init__ raised: fall back to the aggregators
        spec = importlib.util.find_spec("byzfl")
        if spec is None or not spec.submodule_search_locations:
            return None
        for name in [m for m in sys.modules if m == "byzfl" or m.startswith("byzfl.")]:
            del sys.modules[name]
        pkg = types.ModuleType("byzfl")
        pkg.__path__ = list(spec.submodule_search_locations)
        sys.modules["byzfl"] = pkg
        from byzfl.aggregators import aggregators

        return aggregators


if __name__ == "__main__":
    sys.exit(main())


# --- aggregate-numpy: mean, median and trimmed mean against ByzFL's recipes in plain numpy,
# with the code they replaced as "before" rows, each result checked against the anchor's --------


def bench_aggregate_numpy(args: argparse.Namespace) -> None:
    import numpy as np
    from swarmnode.gossip.robust import fast as aggregate_fast
    from swarmnode.gossip.robust.aggregate import RULES

    d = int(args.d)
    for n, f in _sizes(args):
        X = _rows(n, d)
        print(f"aggregation vs plain numpy: n={n} d={d} f={f} float32")

        def np_mean(X: Any = X) -> Any:  # ByzFL's Average
            return np.mean(X, axis=0)

        def np_median(X: Any = X) -> Any:  # ByzFL's Median
            return np.median(X, axis=0)

        def np_trimmed(X: Any = X, n: int = n, f: int = f) -> Any:  # ByzFL's TrMean
            return np.mean(np.sort(X, axis=0)[f : n - f], axis=0)

        cases: list[tuple[str, Timed, Timed]] = [
            ("mean, before (float64 sums)", lambda X=X: _mean_before(X), np_mean),
            ("mean", lambda X=X, f=f: RULES["mean"](X, f), np_mean),
        ]
        for rule, anchor in (("median", np_median), ("trimmed-mean", np_trimmed)):
            ours = functools.partial(RULES[rule], X, f)
            if n <= aggregate_fast.NETWORK_MAX_ROWS:
                cases.append((f"{rule}, before (per-column sorts)", _without_network(ours), anchor))
            cases.append((rule, ours, anchor))
        for label, ours, anchor in cases:
            compare(label, ours, anchor, args.repeats)
            print(f"{'':<4}{_agreement(label, X, f, ours(), anchor())}")


def _without_network(fn: Timed) -> Timed:
    """fn with the sorted rules' min/max network off: the per-column sorts they used before."""
    from swarmnode.gossip.robust import fast as aggregate_fast

    def run() -> Any:
        saved = aggregate_fast.NETWORK_MAX_ROWS
        aggregate_fast.NETWORK_MAX_ROWS = 0
        try:
            return fn()
        finally:
            aggregate_fast.NETWORK_MAX_ROWS = saved

    return run


def _agreement(label: str, X: Any, f: int, ours: Any, anchor: Any) -> str:
    """Check `ours` against the anchor's result within the stated tolerance; say how close."""
    import numpy as np

    u = 2.0**-24
    n = X.shape[0]
    if label.startswith("mean"):
        exact, sum_abs = _exact_column_sums(X)
        exact /= n
        bound = ((n - 1) * u * sum_abs / n) * (1 + u) + u * np.abs(exact)
        err = np.abs(ours.astype(np.float64) - exact) / bound
        err_anchor = np.abs(anchor.astype(np.float64) - exact) / bound
        ok = err.max() <= 1 and err_anchor.max() <= 1
        return (
            f"{'ok' if ok else 'MISMATCH'}: |error| / np.mean's bound, max {err.max():.3f}"
            f" (np.mean {err_anchor.max():.3f}), mean {err.mean():.4f}"
            f" (np.mean {err_anchor.mean():.4f})"
        )
    if label.startswith("median"):
        ok = bool(np.array_equal(ours, anchor))
        return f"{'ok' if ok else 'MISMATCH'}: equal to np.median"
    # trimmed mean: ours sums the middle values in float64, np.mean in float32 (naive)
    m = n - 2 * f
    middle_abs = np.abs(np.sort(X[:, : min(X.shape[1], 200_000)], axis=0)[f : n - f])
    cols = middle_abs.shape[1]
    tol = (m - 1) * u * middle_abs.sum(axis=0, dtype=np.float64) / m * 1.0001
    tol += 2 * np.spacing(np.abs(anchor[:cols]))
    diff = np.abs(ours[:cols].astype(np.float64) - anchor[:cols])
    ok = bool((diff <= tol).all())
    return (
        f"{'ok' if ok else 'MISMATCH'}: |ours - anchor| / (anchor's float32 bound + 2 ulp),"
        f" max {(diff / tol).max():.3f} (first {cols} columns)"
    )


def _exact_column_sums(X: Any) -> tuple[Any, Any]:
    """float64 column sums of X and of |X|, by blocks: float64 sums of float32 values are exact
    to ~n * 2**-53 of sum|x|, far below the float32 bound they check."""
    import numpy as np

    d = X.shape[1]
    sums, sum_abs = np.empty(d), np.empty(d)
    for start in range(0, d, 1 << 16):
        B = X[:, start : start + (1 << 16)].astype(np.float64)
        sums[start : start + B.shape[1]] = B.sum(axis=0)
        sum_abs[start : start + B.shape[1]] = np.abs(B).sum(axis=0)
    return sums, sum_abs


def _mean_before(X: Any) -> Any:
    """The mean before issue 12's float32 change (commit 7ebe1a9), on clean float32 rows: float64
    column sums, two rows at a time (a halving tree) per column block of 2**17 elements, proved
    finite, divided in float64 and rounded to float32. Kept as the benchmark's baseline."""
    import numpy as np
    from swarmnode.gossip.robust.fast import _pairwise_row_sum  # still the cupy path's sum

    n, d = X.shape
    out = np.empty(d, dtype=np.float64)
    width = max(1, (1 << 17) // n)
    for start in range(0, d, width):
        out[start : start + width] = _pairwise_row_sum(X[:, start : start + width], np)
    if not np.isfinite(out).all():
        raise ValueError("the baseline is for clean rows only")
    return (out / n).astype(X.dtype)
