"""In-process robust swarm: why does `--exchange robust` lose, with and without one liar?

The lock-step simulator of scripts/sim/swarm.py (real Trainer, model, optimizer, outer step)
running the node's robust round as gossip/exchange/robust_round.py does it: each peer in turn push-pulls
`--pull` random others; each responder mixes own + clip(pushed - own, its last tau) in at
1/(pull + 1) (`PushGuard.bound`), the initiator aggregates {own} U {answers} with ss-clip
(`gossip.robust.aggregate`, f = 1) and takes its outer step. Peer N-1 can be a liar (`--attack`):
it trains on its shard but serves and pushes `alie:Z` (mean - Z std of the honest models) or
`ipm:E` (r - E (mean - r), r = the honest mean one period ago), or is `silent` (gone: the
swarm's ceiling without its shard). Accuracies are the honest peers'.

Per honest round it records where the liar's row landed (|liar - own| / tau, rejected or
clipped) and how much of the honest rows' difference the clip removed, so the cost of the rule
(clean) and of the liar can be told apart. `--avg` runs the `average` mode's group push-pull
instead (clean or silent only).

Mechanisms to try, each off by default (the node's rule as it is): `--tau kth|median|hist` (the
rule's radius before the ALIE pass, the (m - f)-th smallest distance; or the
radius from this round's median distance, or from the median of the last 16, x `--tau-factor`),
`--bucket S` (answers averaged in random buckets of S first, Karimireddy et al. 2022),
`--reject R` / `--push-reject R` (no say beyond R x tau in own rounds / pushes), `--trim F`
(the F farthest answers get no say), `--trust R` (per-peer running distance ratio, below),
`--no-liar-push` (the liar only answers: which channel does the damage), `--hold` (pushes are
not mixed on arrival but wait as rows of the receiver's next round; with 5 peers and pull 4
that is pull-only), `--progress F` (the F answers pointing farthest against my outer momentum
get that component raised to the next one's), `--outer-momentum`, `--box` (each answer and
push clamped coordinate-wise to own +- the per-coordinate (m - f)-th distance of the last round),
`--push-factor K` (pushes clipped to K x tau). The second line per run: the mean tau, and per
own round how far each honest answer, the honest answers' net, and the liar move the peer (in
tau), with the liar's cosine to that net and to its previous accepted pull.

    .venv/bin/python scripts/sim/robust.py --attack none alie:30 ipm:10 --tau rule
"""

from __future__ import annotations

import argparse
import itertools
import sys
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from swarmnode.gossip.robust import aggregate, heading
from swarmnode.node.train.data.datasets import load_dataset
from swarmnode.node.train.data.shard import all_shards, parse_partition

from scripts.sim import swarm as sw


class Liar:
    """The crafted vector, refreshed once per exchange period from the honest models."""

    def __init__(self, spec: str) -> None:
        kind, _, arg = spec.partition(":")
        self.kind, self.arg, self.ref, self.vec = kind, float(arg or 0), None, None

    def refresh(self, honest: list[np.ndarray]) -> None:
        H = np.stack(honest).astype(np.float64)
        mean = H.mean(axis=0)
        if self.kind == "echo":  # answers each peer with its own model: a perfectly dropped liar
            self.vec = H[0].astype(np.float32)
        elif self.kind == "alie":
            self.vec = (mean - self.arg * H.std(axis=0)).astype(np.float32)
        elif self.kind == "ipm":
            ref = mean if self.ref is None else self.ref
            self.vec = (ref - self.arg * (mean - ref)).astype(np.float32)
        self.ref = mean


def tau_of(rows: np.ndarray, opts: argparse.Namespace, hist: list[float]) -> float:
    """The clip radius of one round: the rule's ((m - f)-th smallest distance) or a variant."""
    d = np.linalg.norm(rows[1:].astype(np.float64) - rows[0], axis=1)
    if opts.tau == "rule":
        return aggregate.clip_radius(rows, 1)
    if opts.tau == "kth":  # the rule before "Robust mode against ALIE": the (m - f)-th smallest
        return float(np.sort(d)[len(d) - 2])
    if opts.tau == "median":  # the median distance of this round, x factor
        return opts.tau_factor * float(np.median(d))
    hist.extend(d.tolist())  # "hist": factor x median of the last 16 distances of own rounds
    del hist[:-16]
    return opts.tau_factor * float(np.median(hist))


HELD: dict[int, dict[int, np.ndarray]] = {}  # `--hold`: receiver -> sender -> pushed model
SCORES: dict[tuple[int, int], float] = {}  # (observer, peer) -> running mean of |x_j - x_i| / tau


BOX: dict[int, np.ndarray] = {}  # `--box`: peer -> per-coordinate radius of its last round


def box_radius(rows: np.ndarray) -> np.ndarray:
    """Per coordinate, the (m - f)-th smallest |x_jk - x_k| over the m answers (f = 1)."""
    a = np.sort(np.abs(rows[1:] - rows[0]), axis=0)
    return a[max(len(a) - 1, 1) - 1]


def trusted(i: int, j: int, opts: argparse.Namespace) -> bool:
    return not opts.trust or SCORES.get((i, j), 0.0) <= opts.trust


def score(i: int, who: list[int], rows: np.ndarray, tau: float, opts: argparse.Namespace) -> Any:
    """`--trust R`: i keeps a running mean of |x_j - x_i| / tau per peer j it pulled; a peer
    above R gets no say in i's rounds nor in its pushes to i. Returns the rows i keeps."""
    d = np.linalg.norm(rows[1:].astype(np.float64) - rows[0], axis=1)
    for k, j in enumerate(who):
        old, r = SCORES.get((i, j)), float(d[k] / tau)
        SCORES[(i, j)] = r if old is None else old + opts.trust_rate * (r - old)
    return np.array([trusted(i, j, opts) for j in who])


def ssclip(rows: np.ndarray, tau: float, opts: argparse.Namespace, rng: Any,
           keep: np.ndarray | None = None, m: Any = None) -> np.ndarray:  # fmt: skip
    """x + (1/n) sum clip(x_j - x, tau), rows farther than REJECT tau dropped; with
    `--bucket s` the answers are first averaged in random buckets of s (Karimireddy et al.)."""
    own, others = rows[0].astype(np.float64), rows[1:].astype(np.float64)
    if opts.bucket > 1:
        perm = rng.permutation(len(others))
        others = np.stack([others[perm[i : i + opts.bucket]].mean(axis=0)
                           for i in range(0, len(others), opts.bucket)])  # fmt: skip
    diffs = others - own
    dist = np.linalg.norm(diffs, axis=1)
    scale = np.minimum(1.0, tau / np.maximum(dist, 1e-300))
    scale[dist > opts.reject * tau] = 0.0
    if keep is not None:
        scale[~keep] = 0.0
    if opts.progress and m is not None and np.linalg.norm(m) > 0:
        diffs = diffs * scale[:, None]
        scale = np.ones_like(scale)
        u = m / np.linalg.norm(m)  # my outer momentum: the direction the swarm is progressing
        p = diffs @ u
        floor = np.sort(p)[min(opts.progress, len(p) - 1)]  # the f most backward: raised to it
        diffs += np.maximum(floor - p, 0.0)[:, None] * u
    if opts.trim:  # the f farthest answers get no say at all
        scale[np.argsort(dist)[len(dist) - opts.trim :]] = 0.0
    return (own + (diffs * scale[:, None]).sum(axis=0) / (len(others) + 1)).astype(np.float32)


def run(opts: argparse.Namespace, data: Any, attack: str) -> dict:
    rng = np.random.default_rng(opts.seed)
    n = opts.peers
    shards = all_shards(data.y_train, n, parse_partition(opts.partition), opts.seed)
    if attack == "silent":
        shards, n = shards[:-1], n - 1
    ts = [sw.build(opts, data, s, opts.batch_size) for s in shards]
    liar = Liar(attack) if attack not in ("none", "silent") else None
    honest = list(range(n - 1)) if liar else list(range(n))
    sw._anchor.clear()
    SCORES.clear()
    HELD.clear()
    BOX.clear()
    for t in ts:
        sw.outer_step(t)
    taus: dict[int, float | None] = dict.fromkeys(range(n))
    hists: dict[int, list[float]] = {i: [] for i in range(n)}
    st: dict[str, list[float]] = {k: [] for k in STATS}
    curve = []
    for step in range(1, opts.steps + 1):
        for t in ts:
            t.step()
        if step % opts.period == 0:
            if liar:
                liar.refresh([ts[i].model.params.data for i in honest])
            if opts.avg:  # the `average` mode's group push-pull (clean or silent only)
                sw.pushpull_round(ts, 3, rng)
            for i in rng.permutation(n) if not opts.avg else ():
                robust_round(int(i), ts, liar, honest, taus, hists, opts, rng, st)
        if step % opts.eval_every == 0 or step == opts.steps:
            curve.append([ts[i].evaluate(data.X_test, data.y_test)[1] for i in honest])
    last3 = np.mean(curve[-3:], axis=0)
    return {"attack": attack, "min3": float(last3.min()), "mean3": float(last3.mean()),
            **{k: float(np.mean(v)) if v else float("nan") for k, v in st.items()}}  # fmt: skip


def robust_round(i: int, ts: list, liar: Liar | None, honest: list[int], taus: dict,
                 hists: dict, opts: argparse.Namespace, rng: Any, st: dict) -> None:  # fmt: skip
    """Peer i's round. The liar (last index) pushes its vector; honest peers push-pull."""
    n = len(ts)
    picked = rng.choice([j for j in range(n) if j != i], size=min(opts.pull, n - 1), replace=False)
    is_liar = liar is not None and i == n - 1
    sent = liar.vec if is_liar else ts[i].model.params.data.copy()
    answers = {j: (liar.vec if liar is not None and j == n - 1 else ts[j].model.params.data.copy())
               for j in picked}  # fmt: skip
    if liar is not None and liar.kind == "echo" and n - 1 in answers:  # says my own model back
        answers[n - 1] = ts[i].model.params.data.copy()
    for j in picked:  # responders: own + clip(pushed - own, tau_j) at 1 / (pull + 1)
        no_push = is_liar and (opts.no_liar_push or liar.kind == "echo")  # echo: a no-op push
        if (liar is not None and j == n - 1) or taus[j] is None or no_push:
            continue
        if opts.hold:  # kept for j's next own round, judged among its rows there
            HELD.setdefault(int(j), {})[i] = sent.copy()
            continue
        if not trusted(int(j), i, opts):
            continue
        x = ts[j].model.params.data
        far = np.linalg.norm(sent.astype(np.float64) - x) > opts.push_reject * taus[j]
        capped = backstop(x, sent, ts[j], opts)
        if opts.box and int(j) in BOX:  # a push: within my last round's box
            capped = np.clip(capped, x - BOX[int(j)], x + BOX[int(j)])
        y = None if far else aggregate.clip_toward(x, capped, taus[j] * opts.push_factor)
        if y is not None:
            PUSHES.append((is_liar, *moves(x, sent, y, taus[j], opts)))
            x += (y - x) / (opts.pull + 1)
        elif is_liar:
            PUSHES.append((True, 0.0, 0.0))
    if is_liar:
        return
    held = {k: v for k, v in HELD.pop(i, {}).items() if k not in answers}  # answers are newer
    answers.update(held)
    own = ts[i].model.params.data
    rows = np.stack([own, *answers.values()])
    tau = tau_of(rows, opts, hists[i])  # on the rows as they came: the cut must not tighten tau
    taus[i] = tau
    record(rows, list(answers), n - 1 if liar else None, tau, st)
    far = np.linalg.norm(rows[1:].astype(np.float64) - own, axis=1) > opts.reject * tau
    rows[1:] = [
        r if f else backstop(own, r, ts[i], opts) for r, f in zip(rows[1:], far, strict=True)
    ]
    if opts.box:  # coordinate-wise: each answer kept within own +- the (m - f)-th |x_jk - x_k|
        BOX[i] = box_radius(rows)
        rows[1:] = np.clip(rows[1:], rows[0] - BOX[i], rows[0] + BOX[i])
    keep = score(i, [int(j) for j in answers], rows, tau, opts)
    m = sw._anchor[id(ts[i])][1].astype(np.float64)
    ts[i].model.params.data[...] = ssclip(rows, tau, opts, rng, keep, m)
    sw.outer_step(ts[i])


REJECT = [aggregate.SS_CLIP_REJECT]
STATS = ("att_ratio", "att_rejected", "honest_cut", "tau", "honest_net", "honest_each",
         "liar_move", "liar_cos_net", "liar_cos_prev")  # fmt: skip
PUSHES: list[tuple[bool, float, float]] = []  # (from the liar, |move| clipped, unclipped) / tau


def backstop(own: np.ndarray, other: np.ndarray, t: Any, opts: argparse.Namespace) -> Any:
    """`--heading C`: other's pull back along the receiver's outer momentum cut to C |m|."""
    if not opts.heading or id(t) not in sw._anchor:
        return other
    m = sw._anchor[id(t)][1]
    b, norm = heading.backward_part(own, other, m)
    if opts.heading_cos and b > opts.heading_cos * np.linalg.norm(other - own.astype(np.float64)):
        return own.copy()  # no say at all beyond that cosine with m
    if opts.heading_drop and b > opts.heading_drop * norm > 0:  # nor beyond DROP x |m| back
        return own.copy()
    if opts.heading_scale and b > opts.heading * norm > 0:  # the whole difference, scaled
        return (own + (other - own) * (opts.heading * norm / b)).astype(np.float32)
    return heading.cap_backward(own, other, m, opts.heading)


def moves(x: np.ndarray, sent: np.ndarray, y: np.ndarray, tau: float,
          opts: argparse.Namespace) -> Any:  # fmt: skip
    """How far one push moves the receiver, in tau: as mixed, and as it would with no bound."""
    w = 1.0 / (opts.pull + 1) / tau
    return (w * float(np.linalg.norm(y.astype(np.float64) - x)),
            w * float(np.linalg.norm(sent.astype(np.float64) - x)))  # fmt: skip


def record(rows: np.ndarray, who: list, liar: int | None, tau: float, st: dict) -> None:
    d = np.linalg.norm(rows[1:].astype(np.float64) - rows[0], axis=1)
    h = np.array([k for k, j in enumerate(who) if j != liar])
    st["honest_cut"].append(float(np.maximum(d[h] - tau, 0).sum() / max(d[h].sum(), 1e-12)))
    st["tau"].append(tau)
    diffs = rows[1:].astype(np.float64) - rows[0]
    clipped = diffs * np.minimum(1.0, tau / np.maximum(d, 1e-300))[:, None] / len(rows)
    net = clipped[h].sum(axis=0)  # the honest answers' net move of me: they mostly cancel
    st["honest_net"].append(float(np.linalg.norm(net) / tau))
    st["honest_each"].append(float(np.linalg.norm(clipped[h], axis=1).mean() / tau))
    if liar in who:
        k = who.index(liar)
        r = float(d[k] / tau)
        st["att_ratio"].append(r)
        st["att_rejected"].append(float(r > REJECT[0]))
        if r <= REJECT[0]:
            st["liar_move"].append(float(np.linalg.norm(clipped[k]) / tau))
            st["liar_cos_net"].append(_cos(clipped[k], net))
            st["liar_cos_prev"].append(_cos(clipped[k], LAST_PULL.get("prev", clipped[k])))
            LAST_PULL["prev"] = clipped[k]


LAST_PULL: dict = {}


def _cos(a: np.ndarray, b: np.ndarray) -> float:
    return float(a @ b / max(np.linalg.norm(a) * np.linalg.norm(b), 1e-300))


def push_stats() -> str:
    """The liar's pushes: the share mixed, and the mean move of one (bounded / not) in tau."""
    liar = [(a, b) for is_liar, a, b in PUSHES if is_liar]
    PUSHES.clear()
    if not liar:
        return ""
    mixed = [(a, b) for a, b in liar if a > 0]
    a, b = np.mean(mixed, axis=0) if mixed else (0.0, 0.0)
    return f"  liar pushes mixed {len(mixed) / len(liar):.2f}, move {a:.4f} (unbounded {b:.4f})"


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--data", default="signal:2000,64,20")
    p.add_argument("--model", default="mlp:128")
    p.add_argument("--partition", default="dirichlet:0.5")
    p.add_argument("--peers", type=int, default=5)
    p.add_argument("--pull", type=int, default=4)
    p.add_argument("--steps", type=int, default=2000)
    p.add_argument("--period", type=int, default=10)
    p.add_argument("--eval-every", type=int, default=100)
    p.add_argument("--lr", type=float, default=0.05)
    p.add_argument("--momentum", type=float, default=0.9)
    p.add_argument("--wd", type=float, default=5e-4)
    sw.add_logit_adjust(p)
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--seed", type=int, nargs="+", default=[0])
    p.add_argument("--outer-lr", type=float, default=0.7)
    p.add_argument("--outer-momentum", type=float, nargs="+", default=[0.5])
    p.add_argument("--attack", nargs="+", default=["none", "alie:30", "ipm:10"])
    p.add_argument("--tau", nargs="+", default=["rule"], choices=["rule", "kth", "median", "hist"])
    p.add_argument("--tau-factor", type=float, default=1.0)
    p.add_argument("--bucket", type=int, nargs="+", default=[1])
    p.add_argument("--reject", type=float, default=aggregate.SS_CLIP_REJECT)
    p.add_argument("--push-reject", type=float, default=aggregate.SS_CLIP_REJECT)
    p.add_argument("--trim", type=int, default=0, help="own round: drop the f farthest")
    p.add_argument("--no-liar-push", action="store_true", help="the liar only answers")
    p.add_argument("--trust", type=float, default=0.0, help="no say above this mean ratio")
    p.add_argument("--trust-rate", type=float, default=0.2)
    p.add_argument("--hold", action="store_true", help="pushes wait for the own round's rule")
    p.add_argument("--progress", type=int, default=0, help="F most backward rows raised")
    p.add_argument("--heading", type=float, nargs="+", default=[0.0],
                   help="cut a pull back along my outer momentum to this x |m| (0: off)")  # fmt: skip
    p.add_argument("--heading-cos", type=float, default=0.0,
                   help="with --heading: no say for a model whose cos with m is above this")  # fmt: skip
    p.add_argument("--heading-drop", type=float, default=0.0,
                   help="with --heading: no say for a model more than this x |m| back")  # fmt: skip
    p.add_argument("--heading-scale", action="store_true",
                   help="with --heading: scale the whole difference instead of cutting")  # fmt: skip
    p.add_argument("--push-factor", type=float, default=1.0, help="pushes clipped to this x tau")
    p.add_argument("--box", action="store_true", help="clamp coordinate-wise first")
    p.add_argument("--avg", action="store_true", help="`average` mode instead (no liar)")
    opts = p.parse_args()
    data = load_dataset(opts.data)
    REJECT[0] = opts.reject
    grid = itertools.product(
        opts.seed, opts.outer_momentum, opts.tau, opts.bucket, opts.heading, opts.attack
    )
    for seed, mom, tau, bucket, cut, attack in grid:
        opts.seed, opts.tau, opts.bucket, opts.heading = seed, tau, bucket, cut
        sw.OUTER.update(lr=opts.outer_lr, beta=mom)
        r = run(opts, data, attack)
        print(f"seed {seed} mom {mom} tau {tau}x{opts.tau_factor:g} bucket {bucket} "
              f"{attack:9}: min {r['min3'] * 100:5.1f} mean {r['mean3'] * 100:5.1f}  "
              f"liar/tau {r['att_ratio']:6.2f} rejected {r['att_rejected']:.2f}  "
              f"honest cut {r['honest_cut']:.3f} heading {cut:g}{push_stats()}", flush=True)  # fmt: skip
        print(f"    tau {r['tau']:.4g}  per round, in tau: honest answer {r['honest_each']:.3f} each, "
              f"net {r['honest_net']:.3f}; liar {r['liar_move']:.3f}, cos with the honest net "
              f"{r['liar_cos_net']:+.2f}, with its last pull {r['liar_cos_prev']:+.2f}", flush=True)  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
