"""Your loop, your optimizer, with the swarm added in three lines: a numpy MLP trained by plain
SGD on the bundled digits, in a loop of its own.

    python examples/own_loop_numpy.py                          # founds a swarm, prints its address
    python examples/own_loop_numpy.py --join 127.0.0.1:PORT    # joins it (its own data shard)
    python examples/own_loop_numpy.py --no-swarm               # the same loop alone

The three lines are `swarmnode.Swarm(params, ...)`, `swarm.step()` after each SGD step, and
`swarm.close()` (here a `with` block). `params` is a dict of arrays: the Swarm copies them once
into one flat buffer and puts views of it back in the dict, so the loop's in-place updates
(`params[k] -= lr * grads[k]`) train the buffer the swarm averages. Update in place: a
rebound array (`params[k] = params[k] - ...`) is one the swarm cannot see, and it says so.
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np
from swarmnode.node.train.data.datasets import load_dataset  # the bundled digits

import swarmnode


def init_params(seed: int, n_in: int = 64, n_hidden: int = 128, n_out: int = 10) -> dict:
    rng = np.random.default_rng(seed)  # the same seed on every peer: the same start
    return {
        "W1": rng.normal(0, np.sqrt(2 / n_in), (n_in, n_hidden)).astype(np.float32),
        "b1": np.zeros(n_hidden, np.float32),
        "W2": rng.normal(0, np.sqrt(1 / n_hidden), (n_hidden, n_out)).astype(np.float32),
        "b2": np.zeros(n_out, np.float32),
    }


def forward(p: dict, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    h = np.maximum(x @ p["W1"] + p["b1"], 0)
    logits = h @ p["W2"] + p["b2"]
    e = np.exp(logits - logits.max(axis=1, keepdims=True))
    return h, e / e.sum(axis=1, keepdims=True)


def loss_and_grads(p: dict, x: np.ndarray, y: np.ndarray) -> tuple[float, dict]:
    h, prob = forward(p, x)
    n = len(y)
    loss = float(-np.log(prob[np.arange(n), y] + 1e-12).mean())
    d = prob.copy()
    d[np.arange(n), y] -= 1
    d /= n
    dh = (d @ p["W2"].T) * (h > 0)
    return loss, {"W1": x.T @ dh, "b1": dh.sum(0), "W2": h.T @ d, "b2": d.sum(0)}


def evaluate(p: dict, x: np.ndarray, y: np.ndarray) -> tuple[float, float]:
    _, prob = forward(p, x)
    loss = float(-np.log(prob[np.arange(len(y)), y] + 1e-12).mean())
    return loss, float((prob.argmax(1) == y).mean())


def train(args: argparse.Namespace) -> list[dict]:
    data = load_dataset("digits")
    index, count = (int(v) for v in args.shard.split("/"))
    X = data.X_train.reshape(len(data.X_train), -1)[index::count]  # this peer's shard
    y = data.y_train[index::count]
    X_test, y_test = data.X_test.reshape(len(data.X_test), -1), data.y_test
    params = init_params(args.seed)
    rng = np.random.default_rng([args.seed, index])
    evals = []

    swarm = None
    if not args.no_swarm:
        swarm = swarmnode.Swarm(params, join=args.join, listen=args.listen,
                                sync_every=args.sync_every, name=f"numpy-{index}")  # fmt: skip
        print(f"swarm at {swarm.addr}", flush=True)
        if args.wait_peers:  # start together: a founder would be done before a joiner came
            while len(swarm.live_peers()) < args.wait_peers:
                time.sleep(0.05)
    t0 = time.perf_counter()  # the evaluations carry the loop's own time (for the benchmark)
    try:
        for step in range(1, args.steps + 1):
            batch = rng.integers(0, len(y), args.batch_size)
            loss, grads = loss_and_grads(params, X[batch], y[batch])
            for k in params:  # plain SGD, in place
                params[k] -= args.lr * grads[k]
            if swarm is not None:
                swarm.step(loss)
            if args.step_time:
                time.sleep(args.step_time)  # a stand-in for a model that takes time
            if step % args.eval_every == 0:
                test_loss, acc = evaluate(params, X_test, y_test)
                t = time.perf_counter() - t0
                evals.append({"step": step, "test_loss": test_loss, "test_acc": acc, "t": t})
                if swarm is not None:
                    swarm.report(test_loss, acc)
                print(f"step {step} loss {loss:.3f} test acc {acc:.1%}", flush=True)
    finally:
        if swarm is not None:
            print(f"rounds {swarm.rounds} utilization {swarm.utilization():.2f}", flush=True)
            swarm.close()
    return evals


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--join", default=None, help="HOST:PORT of a peer of the swarm")
    ap.add_argument("--listen", default="127.0.0.1:0")
    ap.add_argument("--no-swarm", action="store_true", help="the same loop, alone")
    ap.add_argument("--wait-peers", type=int, default=0, help="train once this many others")
    ap.add_argument("--shard", default="0/1", help="INDEX/COUNT of the training set")
    ap.add_argument("--steps", type=int, default=600)
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--lr", type=float, default=0.05)
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


if __name__ == "__main__":
    main()
