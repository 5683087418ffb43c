"""A direction-aware bound for robust mode: no model may pull this peer back along its heading.

The inner-product-manipulation liar (IPM, Xie et al. 2020) serves r - eps (mean - r): the swarm's
mean one period ago, pushed back along the swarm's progress. It sits inside the honest spread,
so the distance rules clip it to tau but do not drop it, and every accepted answer or push pulls
the honest peers back by up to tau / n — along the same direction each time, which the outer
momentum adds up (docs/security.md, "Hostile insiders"; the story: docs/benchmarks-history.md,
"Robust mode against IPM").

What tells it apart is the direction. The peer's outer momentum m (node/train/mixing/mixes.py
`OuterStep`, taken after mixing) is mostly the swarm's progress as this peer saw it; an honest
model's difference x_j - x differs from it mostly sideways (the non-iid spread: shards pull
apart, not back), an IPM model's points eps periods of progress back (scripts/sim/robust.py
measures both). The receiver's own last update is no such reference: honest differences undo
its shard drift, so they point back against it too.

`OuterStep` keeps m as the sum of d = anchor - x, so m points *back*, from the model to where it
was. Before the distance clip, the component of x_j - x along m (backwards) is cut to at most
`limit` = BACKWARD_LIMIT x |m|, and the sideways part is left alone:

    b = (x_j - x) . m / |m|;   x_j <- x_j - (b - limit) m / |m|   when b > limit

A liar can then pull back by at most `limit` per model, and what it can still do sideways is
the distance clip's business. Honest models are cut only when they are that far behind (stale):
with no liar the cut gained in the sim rather than lost. With no heading yet (before the second
outer step) nothing is cut.
"""

from __future__ import annotations

import math

import numpy as np
from swarmnode.gossip.robust import aggregate, chunked
from swarmnode.gossip.robust.push_guard import PushGuard

# In units of |m| (the heading's norm). Chosen in scripts/sim/robust.py (signal task, 5 peers,
# dirichlet:0.5): see docs/benchmarks-history.md "Robust mode against IPM".
BACKWARD_LIMIT = 0.5


def backward_part(own: np.ndarray, other: np.ndarray, back: np.ndarray) -> tuple[float, float]:
    """(b, |m|): the component of other - own along m = `back` (the outer momentum), and |m|
    (float64, chunked: no model-sized temporaries)."""
    a, b, h = own.reshape(-1), other.reshape(-1), back.reshape(-1)
    if not a.shape == b.shape == h.shape:
        raise ValueError(f"heading between {a.shape}, {b.shape} and {h.shape} values")
    scratch = np.empty(min(chunked.CHUNK, a.size), dtype=np.float64)
    dot = sq = 0.0
    for lo in range(0, a.size, chunked.CHUNK):
        d = scratch[: min(chunked.CHUNK, a.size - lo)]
        hh = h[lo : lo + chunked.CHUNK]
        np.subtract(b[lo : lo + chunked.CHUNK], a[lo : lo + chunked.CHUNK], out=d, dtype=np.float64)
        d *= hh
        dot += float(d.sum())
        d[...] = hh
        d *= d
        sq += float(d.sum())
    m = math.sqrt(sq)
    return (dot / m if m > 0 else 0.0), m


def cap_backward(
    own: np.ndarray, other: np.ndarray, back: np.ndarray | None, limit: float = BACKWARD_LIMIT
) -> np.ndarray:
    """`other` with the component of other - own along the outer momentum `back` cut to
    `limit` x |back| (`other` itself when nothing is cut, or with no or a non-finite momentum)."""
    if back is None:
        return other
    p, m = backward_part(own, other, back)
    if not (m > 0 and math.isfinite(m) and math.isfinite(p)) or p <= limit * m:
        return other  # a non-finite `other` is the distance rules' to refuse
    out = other.astype(np.float32, copy=True).reshape(-1)
    shift = (p - limit * m) / m  # x_j - (p - limit |m|) m / |m|, as a multiple of m
    h = back.reshape(-1)
    for lo in range(0, out.size, chunked.CHUNK):
        part = h[lo : lo + chunked.CHUNK].astype(np.float64) * shift
        out[lo : lo + chunked.CHUNK] -= part.astype(np.float32)
    return out.reshape(other.shape)


def bound_push(
    guard: PushGuard,
    own: np.ndarray,
    theirs: np.ndarray,
    tau: float | None,
    back: np.ndarray | None,
    limit: float,
    sender: str,
    clip: float | None = None,
) -> np.ndarray | None:
    """A pushed model as robust mode mixes it: cut along my heading, then `guard.bound` (at
    `clip` if tighter than tau: the sender's travel budget). A model beyond the drop bound is
    judged as it came (refused and logged), not as cut."""
    if back is not None and tau is not None and limit > 0:
        if chunked.distance(own, theirs) <= guard.reject * tau:
            theirs = cap_backward(own, theirs, back, limit)
    if clip is not None and tau is not None and clip < tau:
        return guard.bound(own, theirs, tau, sender, clip)
    return guard.bound(own, theirs, tau, sender)


def ss_clip_round(
    rows: list[np.ndarray], f: int, back: np.ndarray | None, limit: float
) -> tuple[float, np.ndarray]:
    """(tau, aggregate) of an own ss-clip round: tau from the rows as they came (a cut must not
    tighten the radius my pushes are judged by), the rows within the drop bound cut along my
    heading, then ss-clip at that tau (farther rows get no say there, as before)."""
    X = np.stack(rows)
    tau = aggregate.clip_radius(X, f)
    if back is not None and limit > 0 and tau > 0:
        for k in range(1, len(rows)):
            if chunked.distance(X[0], X[k]) <= aggregate.SS_CLIP_REJECT * tau:
                X[k] = cap_backward(X[0], X[k], back, limit)
    out = aggregate.self_centered_clip(X, f, tau if tau > 0 else None)
    return tau, np.asarray(out, dtype=np.float32)
