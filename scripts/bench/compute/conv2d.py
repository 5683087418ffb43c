#!/usr/bin/env python
"""One train step (forward + backward) of a small 2-D conv net: swarmnode kernels vs torch CPU.

    .venv/bin/python scripts/bench/compute/conv2d.py                      # batch 32 and 128
    .venv/bin/python scripts/bench/compute/conv2d.py --batch 32 --repeats 15
    env -u OPENBLAS_CORETYPE .venv/bin/python scripts/bench/compute/conv2d.py  # OpenBLAS's own core

The net is `cnn2d:16k3,p2,32k3,p2,64` on the bundled 8x8 digits: conv 1->16 (3x3, same) + ReLU,
2x2 max-pool, conv 16->32 + ReLU, 2x2 max-pool, dense 64 + ReLU, dense 10, softmax cross-entropy.
torch runs the same net (nn.Conv2d/MaxPool2d/Linear, its default NCHW layout, and channels-last
as a second row) from the same initial weights: before timing, the two losses and all parameter
gradients must agree to float32 rounding, or the script stops (exit 1): the ratio is between two
implementations of one computation. A step is `Sequential.loss_and_grad` in swarmnode and
`zero_grad(set_to_none) + cross_entropy + backward + loss.item()` in torch; neither computes the
input's gradient, neither updates the weights.

Both run on one thread: OMP/OPENBLAS/MKL threads are set to 1 here, before numpy loads (numpy's
BLAS reads them once), and torch.set_num_threads(1). Each repeat times `--steps` steps of each
side, alternating (swarmnode, torch, torch channels-last, swarmnode, ...) so that a busy box slows
both alike; min and median are over repeats, per step. The ratio is swarmnode / torch (> 1: slower).
torch is not a dependency of swarmnode: `pip install 'swarmnode[torch]'` (or `pip install torch`).
"""

from __future__ import annotations

import os

# Before numpy (imported by swarmnode below) loads its BLAS: one thread each, as the brief of the
# comparison says; setdefault would let a stray OMP_NUM_THREADS=16 in the shell skew it.
for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_var] = "1"

import argparse  # noqa: E402
import statistics  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from collections.abc import Callable  # noqa: E402
from typing import Any  # noqa: E402

import numpy as np  # noqa: E402
from swarmnode.kernels.backend import CPU  # noqa: E402
from swarmnode.kernels.flat import FlatParams  # noqa: E402
from swarmnode.kernels.layers import Conv2d, Linear  # noqa: E402
from swarmnode.kernels.model import Sequential  # noqa: E402
from swarmnode.node.train.data.datasets import load_dataset  # noqa: E402
from swarmnode.node.train.model.builtin import build_model  # noqa: E402

SPEC = "cnn2d:16k3,p2,32k3,p2,64"
CHANNELS = (16, 32)  # the conv widths in SPEC
HIDDEN = 64


def openblas_core() -> str:
    """The kernel family numpy's OpenBLAS runs (e.g. Haswell = AVX2, SkylakeX = AVX-512), read
    from the loaded library; '?' where that is not OpenBLAS or the call is missing."""
    import ctypes

    try:
        with open("/proc/self/maps") as maps:
            paths = {line.split()[-1] for line in maps if "openblas" in line.lower()}
        for path in sorted(p for p in paths if p.startswith("/")):
            lib = ctypes.CDLL(path)
            for name in ("scipy_openblas_get_corename64_", "openblas_get_corename64_"):
                fn = getattr(lib, name, None) or None
                if fn is not None:
                    fn.restype = ctypes.c_char_p
                    return fn().decode()
            fn = getattr(lib, "openblas_get_corename", None)
            if fn is not None:
                fn.restype = ctypes.c_char_p
                return fn().decode()
    except OSError:
        pass
    return "?"


def import_torch() -> Any:
    try:
        import torch
    except ImportError:
        return None
    return torch


def torch_net(torch: Any, k: int = 3) -> Any:
    nn = torch.nn
    c1, c2 = CHANNELS
    return nn.Sequential(
        nn.Conv2d(1, c1, k, padding=k // 2),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Conv2d(c1, c2, k, padding=k // 2),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Flatten(),
        nn.Linear(c2 * 2 * 2, HIDDEN),
        nn.ReLU(),
        nn.Linear(HIDDEN, 10),
    )


def copy_weights(torch: Any, ours: Sequential, theirs: Any) -> None:
    """swarmnode's initial weights into the torch net, in torch's layouts: a conv weight
    (k*k*C, O) with rows in (row tap, column tap, channel) order -> (O, C, k, k); the first dense
    layer's rows follow the (H, W, C) flatten order -> torch's (C, H, W)."""
    convs = [m for m in theirs if isinstance(m, torch.nn.Conv2d)]
    dense = [m for m in theirs if isinstance(m, torch.nn.Linear)]
    ours_conv = [(i, lay) for i, lay in enumerate(ours.layers) if isinstance(lay, Conv2d)]
    ours_dense = [(i, lay) for i, lay in enumerate(ours.layers) if isinstance(lay, Linear)]
    v = ours.params.views
    with torch.no_grad():
        for (i, lay), mod in zip(ours_conv, convs, strict=True):
            w = v[f"{i}.W"].reshape(lay.k, lay.k, -1, lay.out_channels).transpose(3, 2, 0, 1)
            mod.weight.copy_(torch.from_numpy(np.ascontiguousarray(w)))
            mod.bias.copy_(torch.from_numpy(v[f"{i}.b"]))
        for n, ((i, _), mod) in enumerate(zip(ours_dense, dense, strict=True)):
            w = v[f"{i}.W"]
            if n == 0:  # rows (h, w, c) -> (c, h, w)
                w = w.reshape(2, 2, CHANNELS[1], -1).transpose(2, 0, 1, 3).reshape(w.shape)
            mod.weight.copy_(torch.from_numpy(np.ascontiguousarray(w.T)))
            mod.bias.copy_(torch.from_numpy(v[f"{i}.b"]))


def torch_grads_in_our_layout(torch: Any, ours: Sequential, theirs: Any) -> np.ndarray:
    """torch's gradients mapped back into swarmnode's flat gradient vector."""
    g = FlatParams(list(ours.params.shapes.items()), np, ours.params.dtype)  # same layout
    convs = [m for m in theirs if isinstance(m, torch.nn.Conv2d)]
    dense = [m for m in theirs if isinstance(m, torch.nn.Linear)]
    ours_conv = [i for i, lay in enumerate(ours.layers) if isinstance(lay, Conv2d)]
    ours_dense = [i for i, lay in enumerate(ours.layers) if isinstance(lay, Linear)]
    for i, mod in zip(ours_conv, convs, strict=True):
        w = mod.weight.grad.numpy()  # (O, C, k, k) -> (k, k, C, O)
        g.grads[f"{i}.W"][...] = w.transpose(2, 3, 1, 0).reshape(g.grads[f"{i}.W"].shape)
        g.grads[f"{i}.b"][...] = mod.bias.grad.numpy()
    for n, (i, mod) in enumerate(zip(ours_dense, dense, strict=True)):
        w = mod.weight.grad.numpy().T
        if n == 0:  # rows (c, h, w) -> (h, w, c)
            w = w.reshape(CHANNELS[1], 2, 2, -1).transpose(1, 2, 0, 3).reshape(w.shape)
        g.grads[f"{i}.W"][...] = w
        g.grads[f"{i}.b"][...] = mod.bias.grad.numpy()
    return g.grad


def check_same_computation(torch: Any, x: np.ndarray, y: np.ndarray) -> str:
    """Same weights, same batch: the losses and gradients must agree (else the ratio lies)."""
    ours = build_model(SPEC, x.shape[1:], 10, CPU, seed=0)
    theirs = torch_net(torch)
    copy_weights(torch, ours, theirs)
    loss = ours.loss_and_grad(x, y)
    xt, yt = torch.from_numpy(x[:, None]), torch.from_numpy(y)
    loss_t = torch.nn.functional.cross_entropy(theirs(xt), yt)
    loss_t.backward()
    grad_t = torch_grads_in_our_layout(torch, ours, theirs)
    scale = float(np.abs(grad_t).max())
    worst = float(np.abs(ours.params.grad - grad_t).max()) / scale
    if abs(loss - loss_t.item()) > 1e-5 * max(1.0, abs(loss)) or worst > 1e-4:
        raise SystemExit(
            f"conv2d bench: swarmnode and torch disagree on the same net and batch: loss "
            f"{loss:.6f} vs {loss_t.item():.6f}, largest gradient difference {worst:.2e} of "
            "the largest gradient; not timing two different computations"
        )
    return f"loss {loss:.6f} = {loss_t.item():.6f}, gradients within {worst:.1e} (relative)"


def swarmnode_step(x: np.ndarray, y: np.ndarray) -> Callable[[], float]:
    model = build_model(SPEC, x.shape[1:], 10, CPU, seed=0)
    return lambda: model.loss_and_grad(x, y)


def torch_step(
    torch: Any, x: np.ndarray, y: np.ndarray, channels_last: bool
) -> Callable[[], float]:
    torch.manual_seed(0)
    net = torch_net(torch)
    xt, yt = torch.from_numpy(x[:, None]).contiguous(), torch.from_numpy(y)
    if channels_last:
        net = net.to(memory_format=torch.channels_last)
        xt = xt.contiguous(memory_format=torch.channels_last)
    cross_entropy = torch.nn.functional.cross_entropy

    def step() -> float:
        net.zero_grad(set_to_none=True)
        loss = cross_entropy(net(xt), yt)
        loss.backward()
        return loss.item()

    return step


def time_block(step: Callable[[], float], steps: int) -> float:
    t0 = time.perf_counter()
    for _ in range(steps):
        step()
    return (time.perf_counter() - t0) / steps


def bench(steps_by_name: dict[str, Callable[[], float]], steps: int, repeats: int) -> dict:
    for step in steps_by_name.values():  # warm-up: allocations, torch's first-call dispatch
        time_block(step, max(steps // 5, 3))
    times: dict[str, list[float]] = {name: [] for name in steps_by_name}
    for _ in range(repeats):
        for name, step in steps_by_name.items():  # interleaved: drift hits every side alike
            times[name].append(time_block(step, steps))
    return times


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--batch", type=int, action="append", help="batch size (repeatable; 32 128)")
    p.add_argument("--steps", type=int, default=100, help="steps per timed block (default 100)")
    p.add_argument("--repeats", type=int, default=9, help="timed blocks per side (default 9)")
    args = p.parse_args(argv)
    batches = args.batch or [32, 128]
    if min(batches) < 1 or args.steps < 1 or args.repeats < 1:
        p.error("--batch, --steps and --repeats must be >= 1")
    torch = import_torch()
    if torch is None:
        print(
            "conv2d bench: torch is not installed, so there is nothing to compare against: "
            "pip install 'swarmnode[torch]' (or: pip install torch), then run this again",
            file=sys.stderr,
        )
        return 2
    torch.set_num_threads(1)
    torch.set_num_interop_threads(1)
    data = load_dataset("digits")
    print(f"net {SPEC} on digits 8x8x1; numpy {np.__version__}, torch {torch.__version__}")
    print(
        f"threads: torch {torch.get_num_threads()}, OMP/OPENBLAS/MKL_NUM_THREADS=1; "
        f"OPENBLAS_CORETYPE={os.environ.get('OPENBLAS_CORETYPE', '(unset)')}, "
        f"numpy's OpenBLAS runs {openblas_core()} kernels"
    )
    print(f"{args.repeats} blocks of {args.steps} steps per side; per-step times in microseconds")
    rng = np.random.default_rng(0)
    header = f"{'batch':>5}  {'side':<22} {'min':>8} {'median':>8}  {'ratio min':>9} {'median':>7}"
    rows = [header, "-" * len(header)]
    for batch in batches:
        idx = rng.choice(len(data.y_train), size=batch, replace=batch > len(data.y_train))
        x, y = data.X_train[idx], data.y_train[idx]
        print(f"batch {batch}: same net, same batch: {check_same_computation(torch, x, y)}")
        sides = {
            "swarmnode (NHWC)": swarmnode_step(x, y),
            "torch (NCHW)": torch_step(torch, x, y, channels_last=False),
            "torch (channels_last)": torch_step(torch, x, y, channels_last=True),
        }
        times = bench(sides, args.steps, args.repeats)
        ours_min, ours_med = (
            min(times["swarmnode (NHWC)"]),
            statistics.median(times["swarmnode (NHWC)"]),
        )
        for name, ts in times.items():
            lo, med = min(ts), statistics.median(ts)
            ratio = (
                ""
                if name.startswith("swarmnode")
                else f"{ours_min / lo:>9.2f} {ours_med / med:>7.2f}"
            )
            rows.append(f"{batch:>5}  {name:<22} {lo * 1e6:>8.0f} {med * 1e6:>8.0f}  {ratio}")
    print("\n".join(rows))
    print("ratio = swarmnode time / torch time per step (> 1: swarmnode is slower)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
