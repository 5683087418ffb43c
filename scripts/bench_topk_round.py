"""One pair's topk round, the reference updates dense (before) against sparse (now), one run.

    python scripts/bench_topk_round.py [--n 5000000] [--ratio 0.01] [--rounds 9]

A round is what each side of a compressed push-pull does on the CPU (gossip/exchange/compressed.py):
A encodes x_A against its reference for B (x - ref, the topk selection, the new reference),
the frame is built, B decodes and validates it and adds it to its copy of A, B answers the
same way, A takes the answer in, and both take the gossip step. "dense" is the path before
issue 11 (a tk16 frame decoded to n values, the copies updated by dense sums, each checked
for finiteness in full); "sparse" adds the k values at their indices. Both run in turns on
the same vectors; each phase's time is the best over the rounds (the machine is shared).
"""

from __future__ import annotations

import argparse
import contextlib
import time
from collections.abc import Iterator

import numpy as np
from swarmnode.gossip.exchange import refs
from swarmnode.gossip.exchange.refs import PairRefs
from swarmnode.gossip.wire import frames as wire
from swarmnode.kernels import compress

PHASES = ("encode", "receive", "gossip_step")


def dense_plus(base: np.ndarray, packed: compress.Packed) -> np.ndarray:
    step = compress.decode(packed)
    step += base
    return step


@contextlib.contextmanager
def timed(into: dict[str, float], phase: str) -> Iterator[None]:
    t0 = time.perf_counter()
    yield
    into[phase] = into.get(phase, 0.0) + time.perf_counter() - t0


class Pair:
    def __init__(self, n: int, ratio: float, sparse: bool, seed: int = 0) -> None:
        rng = np.random.default_rng(seed)
        x0 = rng.standard_normal(n).astype(np.float32)
        self.x = {p: x0 + 0.1 * rng.standard_normal(n).astype(np.float32) for p in "AB"}
        self.noise = 0.01 * rng.standard_normal(n).astype(np.float32)
        self.r = {p: PairRefs("topk", ratio, n, init=x0) for p in "AB"}
        self.n, self.sparse = n, sparse

    def _take(self, me: str, other: str, frame: memoryview, t: dict[str, float]) -> dict:
        with timed(t, "receive"):
            header, vec = wire.decode_params(frame, expected_size=self.n, sparse=self.sparse)
            wire.validate_params(vec, self.n)
            self.r[me].receive(other, header, vec)
        return header

    def round(self) -> dict[str, float]:
        t: dict[str, float] = {}
        a, b, x = self.r["A"], self.r["B"], self.x
        with timed(t, "encode"):
            out = a.encode("B", x["A"])
            extra = {**out.fields, **a.want("B"), "mix": 0.5}
            frame = wire.encode_packed(out.packed, sender="A", step=0, extra=extra)
        header = self._take("B", "A", frame, t)
        with timed(t, "encode"):
            back = b.encode("A", x["B"], header)
            b.commit(back)
            frame = wire.encode_packed(back.packed, sender="B", step=0, extra=back.fields)
        with timed(t, "gossip_step"):
            x["B"] += b.gossip_step("A", 0.5)
        self._take("A", "B", frame, t)
        a.commit(out)
        with timed(t, "gossip_step"):
            x["A"] += a.gossip_step("B", 0.5)
        x["A"] += self.noise  # training moves the models between rounds
        x["B"] -= self.noise
        return t


def run_round(pair: Pair) -> dict[str, float]:
    if pair.sparse:
        return pair.round()
    saved, refs._plus = refs._plus, dense_plus
    try:
        return pair.round()
    finally:
        refs._plus = saved


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=int, default=5_000_000)
    ap.add_argument("--ratio", type=float, default=0.01)
    ap.add_argument("--rounds", type=int, default=9)
    args = ap.parse_args()
    pairs = {m: Pair(args.n, args.ratio, m == "sparse") for m in ("dense", "sparse")}
    best: dict[str, dict[str, float]] = {m: {} for m in pairs}
    for i in range(args.rounds + 1):  # the first round (on the shared start) is a warm-up
        for mode, pair in pairs.items():
            t = run_round(pair)
            t["round"] = sum(t.values())
            for phase, s in t.items() if i else ():
                best[mode][phase] = min(best[mode].get(phase, s), s)
    assert pairs["dense"].r["A"].full_frames == 0, "every round should be a delta"
    for mode in pairs:
        same = np.array_equal(pairs[mode].x["A"], pairs["dense"].x["A"])
        print(f"{mode}: models equal to dense: {same}")
    print(f"n={args.n} ratio={args.ratio} rounds={args.rounds} (best of, ms; both sides)")
    print(f"{'phase':12} {'dense':>9} {'sparse':>9} {'sparse/dense':>13}")
    for phase in (*PHASES, "round"):
        d, s = best["dense"][phase] * 1e3, best["sparse"][phase] * 1e3
        print(f"{phase:12} {d:9.1f} {s:9.1f} {s / d:13.2f}")


if __name__ == "__main__":
    main()
