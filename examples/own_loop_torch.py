"""Your torch loop, unchanged, with the swarm added in three lines: an MLP (or a small conv
net) on the bundled digits, trained by AdamW with a cosine schedule and gradient clipping (needs
torch: pip install 'swarmnode[torch]').

    python examples/own_loop_torch.py                          # founds a swarm, prints its address
    python examples/own_loop_torch.py --join 127.0.0.1:PORT    # joins it (its own data shard)
    python examples/own_loop_torch.py --no-swarm               # the same loop alone
    python examples/own_loop_torch.py --model conv             # the conv net (also with --join)

The two models are the built-in specs `mlp:128` and `cnn2d:8x8,16k3,p2,64` written in torch
(`build_conv` is the conv net as a `--model own_loop_torch:build_conv` factory, for the built-in
loop on this very module).

`swarmnode.Swarm(model)` makes each parameter's `.data` a view into one flat buffer, once; the
optimizer, its state and the schedule stay yours, and `swarm.step()` after `opt.step()` lands
the swarm's mix in place every `sync_every` steps (swarmnode's outer step on top: DiLoCo's
split, AdamW inside, Nesterov outside). Build the optimizer before or after the Swarm, as you
like; move the model to its device before it.
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np
import torch
from swarmnode.node.train.data.datasets import load_dataset  # the bundled digits
from torch import nn

import swarmnode

MODELS = ("mlp", "conv")


def make_model(seed: int, kind: str = "mlp") -> nn.Module:
    """`mlp`: the built-in `mlp:128` (64-128-10); `conv`: the built-in
    `cnn2d:8x8,16k3,p2,64`: conv 1->16 (3x3, 'same') + ReLU, 2x2 max-pool, dense 256-64 +
    ReLU, dense 64-10, started as the built-in models start. The digits' 8x8 samples in
    either case."""
    torch.manual_seed(seed)  # the same seed on every peer: the same start
    if kind == "conv":
        return _builtin_init(
            nn.Sequential(
                nn.Flatten(),  # 8x8 images or 64 flat values alike: one channel of 8x8
                nn.Unflatten(1, (1, 8, 8)),
                nn.Conv2d(1, 16, 3, padding=1),
                nn.ReLU(),
                nn.MaxPool2d(2),
                nn.Flatten(),
                nn.Linear(16 * 4 * 4, 64),
                nn.ReLU(),
                nn.Linear(64, 10),
            )
        )
    return nn.Sequential(nn.Flatten(), nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 10))


def _builtin_init(net: nn.Module) -> nn.Module:
    """The built-in models' start (kernels/layers.py): weights normal with std sqrt(2 / fan_in)
    (He), biases zero; torch's default (uniform, smaller) cost the conv net about a point on
    the digits, alone as in a swarm (docs/benchmarks.md, "Your loop with our swarm")."""
    for layer in net.modules():
        if isinstance(layer, nn.Linear | nn.Conv2d):
            nn.init.kaiming_normal_(layer.weight, nonlinearity="relu")
            nn.init.zeros_(layer.bias)
    return net


def build_conv(seed: int = 0, device: str = "cpu") -> swarmnode.TorchModel:
    """The conv net as a factory of the built-in loop (`--model own_loop_torch:build_conv`,
    with examples/ on PYTHONPATH): the same module and start as `--model conv` here."""
    net = make_model(seed, "conv").to(device)
    return swarmnode.TorchModel(net, nn.functional.cross_entropy, device=device)


def train(args: argparse.Namespace) -> list[dict]:
    data = load_dataset("digits")
    index, count = (int(v) for v in args.shard.split("/"))
    X = torch.from_numpy(np.ascontiguousarray(data.X_train[index::count]))
    y = torch.from_numpy(data.y_train[index::count])
    X_test, y_test = torch.from_numpy(data.X_test), torch.from_numpy(data.y_test)
    model = make_model(args.seed, args.model).to(args.device)
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=1e-4)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=args.steps)
    gen = torch.Generator().manual_seed(args.seed * 1000 + index)
    evals = []

    swarm = None
    if not args.no_swarm:
        swarm = swarmnode.Swarm(model, join=args.join, listen=args.listen,
                                sync_every=args.sync_every, name=f"torch-{index}")  # fmt: skip
        print(f"swarm at {swarm.addr}", flush=True)
        while len(swarm.live_peers()) < args.wait_peers:  # start together
            time.sleep(0.05)
    t0 = time.perf_counter()  # the evaluations carry the loop's own time (for the benchmark)
    try:
        for step in range(1, args.steps + 1):
            batch = torch.randint(0, len(y), (args.batch_size,), generator=gen)
            xb, yb = X[batch].to(args.device), y[batch].to(args.device)
            loss = nn.functional.cross_entropy(model(xb), yb)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            sched.step()
            if swarm is not None:
                swarm.step()
            if args.step_time:
                time.sleep(args.step_time)
            if step % args.eval_every == 0:
                with torch.no_grad():
                    out = model(X_test.to(args.device))
                    test_loss = float(nn.functional.cross_entropy(out, y_test.to(args.device)))
                    acc = float((out.argmax(1).cpu() == y_test).float().mean())
                t = time.perf_counter() - t0
                evals.append({"step": step, "test_loss": test_loss, "test_acc": acc, "t": t})
                if swarm is not None:
                    swarm.report(test_loss, acc)
                print(f"step {step} loss {loss.item():.3f} test acc {acc:.1%}", flush=True)
    finally:
        if swarm is not None:
            print(f"rounds {swarm.rounds} utilization {swarm.utilization():.2f}", flush=True)
            swarm.close()
    return evals


def main(argv: list[str] | None = None) -> list[dict]:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--join", default=None, help="HOST:PORT of a peer of the swarm")
    ap.add_argument("--listen", default="127.0.0.1:0")
    ap.add_argument("--no-swarm", action="store_true", help="the same loop, alone")
    ap.add_argument("--wait-peers", type=int, default=0, help="train once this many others")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--model", choices=MODELS, default="mlp")
    ap.add_argument("--shard", default="0/1", help="INDEX/COUNT of the training set")
    ap.add_argument("--steps", type=int, default=600)
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--sync-every", type=int, default=10)
    ap.add_argument("--eval-every", type=int, default=50)
    ap.add_argument("--step-time", type=float, default=0.0)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", default=None, help="write the evaluations here")
    args = ap.parse_args(argv)
    evals = train(args)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(evals, f)
    return evals


if __name__ == "__main__":
    main()
