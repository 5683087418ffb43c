"""What an `average` peer mixes of its group's answers, and the consensus cut.

A group's answers are not mixed as they come: a dissensus liar (He, Karimireddy and Jaggi 2022)
answers each peer its own model pushed away from the honest mean, x_i - eps (mean - x_i), and
its answers alone reverse the consensus step, however its pushes are clipped. The threat and
the bounds: docs/security.md ("Hostile insiders"); the figures: docs/benchmarks.md ("Hostile
insiders"). Two bounds, both about this round:

- answers are clipped like robust mode's ss-clip, around the model this peer sent: to the
  (k - 1)-th smallest of the k answers' distances when k >= 2 (one liar per group is clipped
  to an honest distance), never past the push bound's radius, and an answer farther than
  `SS_CLIP_REJECT` radii counts as this peer's own model. The mean is taken over what is left.
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
    Three distance passes decide (`_geometry`), and a copy of `other` is made only when it is
    cut (no model-sized temporary for own - consensus)."""
    if consensus is None or not limit > 0:
        return other
    _, dot, h2 = _geometry(own, other, consensus)
    shift = _cut_shift(dot, h2, limit)
    if shift == 0.0:
        return other  # within the limit; a non-finite `other` is the distance rules' to refuse
    return _minus_along(other, own, consensus, shift, in_place=False)


def cut_shift(to_own: float, own_to_c: float, to_c: float, limit: float) -> float:
    """`_cut_shift` from three distances, |other - own|, |own - consensus| and |other -
    consensus|, measured by the caller (the exchange reads its model in place): 0.0 where
    `cut_away` leaves `other` as it is."""
    h2 = own_to_c * own_to_c
    return _cut_shift(_polar_dot(to_c * to_c, to_own * to_own, h2), h2, limit)


def bound_answers(
    sent: np.ndarray,
    answers: list[np.ndarray],
    consensus: np.ndarray | None,
    tau: float | None,
    away_limit: float,
) -> list[np.ndarray]:
    """The answers as the average round mixes them (see the module doc): cut away from the
    consensus, clipped around `sent`; an answer too far off becomes `sent` (no say).

    One pass over each answer decides all of it (`_geometry`: |a - sent|, and its component
    along sent - consensus, from which the cut answer's distance follows); an answer is
    written only where it is cut (in place where its buffer is writable: a received body) or
    clipped (a new vector). An honest answer is returned as it came."""
    cuts, dists = [], []
    for a in answers:
        d2, dot, h2 = _geometry(sent, a, consensus)
        shift = _cut_shift(dot, h2, away_limit)  # a - shift (sent - consensus)
        cuts.append(shift)
        v = d2 - 2 * shift * dot + shift * shift * h2  # |a - shift h - sent|^2
        dists.append(math.sqrt(v) if v > 0 else 0.0 if v <= 0 else math.nan)  # NaN stays NaN
    radius = _round_radius(dists, tau)
    out = []
    for a, shift, d in zip(answers, cuts, dists, strict=True):
        if radius is not None and not d <= aggregate.SS_CLIP_REJECT * radius:  # NaN too
            out.append(sent)
            continue
        if shift > 0:
            assert consensus is not None
            a = _minus_along(a, sent, consensus, shift)
        if radius is not None and d > radius:
            a = chunked.toward(sent, a, radius / d)
        out.append(a)
    return out


def _cut_shift(dot: float, h2: float, limit: float) -> float:
    """How much of sent - consensus to take off an answer whose component along it is
    dot / |sent - consensus|: 0 within `limit` (or without a consensus)."""
    size = math.sqrt(h2)
    if not (limit > 0 and size > 0 and math.isfinite(size) and math.isfinite(dot)):
        return 0.0
    p = dot / size
    return (p - limit) / size if p > limit else 0.0


def _geometry(
    sent: np.ndarray, a: np.ndarray, consensus: np.ndarray | None
) -> tuple[float, float, float]:
    """(|a - sent|^2, <a - sent, sent - consensus>, |sent - consensus|^2), the dot by
    polarization: |a - c|^2 = |a - s|^2 + 2 <a - s, s - c> + |s - c|^2. Three SIMD distance
    passes (chunked.distance: ~5 ms per 100 MB pair here) cost a third of one float64 pass
    that forms the differences (54 ms). The last two are 0.0 without a consensus."""
    d2 = chunked.distance(sent, a) ** 2
    if consensus is None:
        return d2, 0.0, 0.0
    h2 = chunked.distance(sent, consensus) ** 2
    return d2, _polar_dot(chunked.distance(a, consensus) ** 2, d2, h2), h2


def _polar_dot(ac2: float, as2: float, sc2: float) -> float:
    """<a - s, s - c> from |a - c|^2, |a - s|^2 and |s - c|^2 (polarization)."""
    return (ac2 - as2 - sc2) / 2.0


def _minus_along(
    a: np.ndarray, sent: np.ndarray, consensus: np.ndarray, shift: float, in_place: bool = True
) -> np.ndarray:
    """a - shift (sent - consensus), over `a` itself where `in_place` and it is a writable
    float32 buffer (a received answer, this peer's to write), else into a new vector."""
    writable = in_place and a.dtype == np.float32 and a.flags.writeable and a.flags.c_contiguous
    out = a.reshape(-1) if writable else a.astype(np.float32).reshape(-1)
    s, c = sent.reshape(-1), consensus.reshape(-1)
    scratch = np.empty(min(chunked.CHUNK, s.size), dtype=np.float64)
    for lo in range(0, s.size, chunked.CHUNK):
        m = min(chunked.CHUNK, s.size - lo)
        part = scratch[:m]
        np.subtract(s[lo : lo + m], c[lo : lo + m], out=part, dtype=np.float64)
        part *= shift
        out[lo : lo + m] -= part.astype(np.float32)
    return out.reshape(a.shape)


def mean_into(rows: list[np.ndarray], out: np.ndarray | None = None) -> np.ndarray:
    """mean(rows) as float32, into `out` where it fits (a buffer reused round after round: no
    fresh model-sized allocation, whose page faults cost more than the pass), summed in float64
    chunk by chunk (no stacked copy of the rows)."""
    first = rows[0].reshape(-1)
    if out is None or out.shape != (first.size,) or out.dtype != np.float32:
        out = np.empty(first.size, dtype=np.float32)
    if len(rows) == 1:
        np.copyto(out, first)
        return out
    acc = np.empty(min(chunked.CHUNK, first.size), dtype=np.float64)
    for lo in range(0, first.size, chunked.CHUNK):
        m = min(chunked.CHUNK, first.size - lo)
        part = acc[:m]
        part[...] = first[lo : lo + m]
        for row in rows[1:]:
            part += row.reshape(-1)[lo : lo + m]
        part /= len(rows)
        out[lo : lo + m] = part
    return out


def _round_radius(dists: list[float], tau: float | None) -> float | None:
    """The (k - 1)-th smallest distance of k >= 2 answers (ss-clip with f = 1), at most
    `tau`; `tau` for one answer."""
    bound = tau if tau is not None and tau > 0 else math.inf
    finite = sorted(d for d in dists if math.isfinite(d))
    r = min(bound, finite[len(finite) - 2]) if len(finite) >= 2 else bound
    return r if 0 < r < math.inf else None
