"""What an `average` peer mixes of its group's answers, and the consensus cut (issue 22).

The average round mixed its group's answers as they came (a liar is picked only as one of
`group` random members): a dissensus liar (He, Karimireddy and Jaggi 2022) that answers each
peer its own model pushed away from the honest mean, x_i - eps (mean - x_i), then took the
default swarm from 64% to 20-30% on non-iid shards of the signal task; clipping its pushes did not
help, since its answers alone reverse the consensus step. Two bounds, both about this round:

- answers are clipped like robust mode's ss-clip, around the model this peer sent: to the
  (k - 1)-th smallest of the k answers' distances when k >= 2 (one liar per group is clipped
  to an honest distance), never past the push bound's radius, and an answer farther than
  `SS_CLIP_REJECT` radii counts as this peer's own model. The mean is then taken as before.
- the consensus cut: where the swarm is, as this peer last saw it, is the mean of its last
  round's bounded answers (`consensus`). A model's component pointing away from it, beyond
  `AWAY_LIMIT` x the median distance of the recent rounds, is cut (answers and pushes alike;
  the heading cut of robust mode does the same along the outer momentum, heading.py). Honest
  models differ from this peer mostly sideways (non-iid shards pull apart, not away from
  where all of them are); a dissensus model points straight away.

Both cost one pass over a model per answer or push (chunked: no model-sized temporaries
beyond the result).
"""

from __future__ import annotations

import math

import numpy as np
from swarmnode.gossip.robust import aggregate, chunked

AWAY_LIMIT = 0.5  # in median distances: how far one model may pull away from the consensus


def cut_away(
    own: np.ndarray, other: np.ndarray, consensus: np.ndarray | None, limit: float
) -> np.ndarray:
    """`other` with its component pointing from the consensus through `own` and beyond cut to
    `limit` (an absolute distance); `other` itself without a consensus, or within the limit.
    One pass over the three to decide, a copy of `other` only when it is cut (no model-sized
    temporary for own - consensus)."""
    if consensus is None or not limit > 0:
        return other
    p, size = away_part(own, other, consensus)
    if not (size > 0 and math.isfinite(size) and math.isfinite(p)) or p <= limit:
        return other  # a non-finite `other` is the distance rules' to refuse
    shift = (p - limit) / size  # other - shift (own - consensus)
    a, c = own.reshape(-1), consensus.reshape(-1)
    out = other.astype(np.float32, copy=True).reshape(-1)
    scratch = np.empty(min(chunked.CHUNK, a.size), dtype=np.float64)
    for lo in range(0, a.size, chunked.CHUNK):
        d = scratch[: min(chunked.CHUNK, a.size - lo)]
        np.subtract(a[lo : lo + chunked.CHUNK], c[lo : lo + chunked.CHUNK], out=d, dtype=np.float64)
        d *= shift
        out[lo : lo + chunked.CHUNK] -= d.astype(np.float32)
    return out.reshape(other.shape)


def away_part(own: np.ndarray, other: np.ndarray, consensus: np.ndarray) -> tuple[float, float]:
    """(p, |own - consensus|): p the component of other - own along own - consensus (float64,
    chunked: no model-sized temporaries)."""
    a, b, c = own.reshape(-1), other.reshape(-1), consensus.reshape(-1)
    if not a.shape == b.shape == c.shape:
        raise ValueError(f"consensus cut between {a.shape}, {b.shape} and {c.shape} values")
    n = min(chunked.CHUNK, a.size)
    d, h = np.empty(n, dtype=np.float64), np.empty(n, dtype=np.float64)
    dot = sq = 0.0
    for lo in range(0, a.size, chunked.CHUNK):
        m = min(chunked.CHUNK, a.size - lo)
        ai = a[lo : lo + m]
        np.subtract(ai, c[lo : lo + m], out=h[:m], dtype=np.float64)
        np.subtract(b[lo : lo + m], ai, out=d[:m], dtype=np.float64)
        dot += float(np.dot(d[:m], h[:m]))
        sq += float(np.dot(h[:m], h[:m]))
    size = math.sqrt(sq)
    return (dot / size if size > 0 else 0.0), size


def bound_answers(
    sent: np.ndarray,
    answers: list[np.ndarray],
    consensus: np.ndarray | None,
    tau: float | None,
    away_limit: float,
) -> list[np.ndarray]:
    """The answers as the average round mixes them (see the module doc): cut away from the
    consensus, clipped around `sent`; an answer too far off becomes `sent` (no say)."""
    cut = [cut_away(sent, a, consensus, away_limit) for a in answers]
    dists = [chunked.distance(sent, a) for a in cut]
    radius = _round_radius(dists, tau)
    if radius is None:
        return cut
    out = []
    for a, d in zip(cut, dists, strict=True):
        if not d <= aggregate.SS_CLIP_REJECT * radius:  # NaN too
            out.append(sent)
        elif d <= radius:
            out.append(a)
        else:
            out.append(chunked.toward(sent, a, radius / d))
    return out


def _round_radius(dists: list[float], tau: float | None) -> float | None:
    """The (k - 1)-th smallest distance of k >= 2 answers (ss-clip with f = 1), at most
    `tau`; `tau` for one answer."""
    bound = tau if tau is not None and tau > 0 else math.inf
    finite = sorted(d for d in dists if math.isfinite(d))
    r = min(bound, finite[len(finite) - 2]) if len(finite) >= 2 else bound
    return r if 0 < r < math.inf else None
