"""Aggregation rules: pure functions from n peers' parameter vectors to one vector.

Every rule has the signature `rule(updates, f, **params) -> vector`: `updates` is an (n, d)
float32 (or float64) numpy or cupy array, one row per peer, `f` the number of byzantine rows it
must tolerate, and the result a length-d vector of the input's dtype and array module.
`RULES` maps the names the CLI accepts (`--aggregator`) to them.

Rows holding NaN or Inf are dropped before anything else: they never enter a mean or a median,
and Krum never selects one. They still count against nobody's f (a broken peer is not assumed
to be one of the f liars), so the rule's constraint must hold for the rows that remain; if it
does not, `AggregationError` names n, f and how many rows were dropped.

| rule           | needs (n finite rows) | what it computes                                      |
|----------------|-----------------------|-------------------------------------------------------|
| mean           | n >= 1                | plain average (not robust; the baseline)              |
| median         | n >= 2f + 1           | coordinate-wise median                                |
| trimmed-mean   | n >= 2f + 1           | per coordinate: drop the f lowest and f highest, mean |
| krum           | n >= 2f + 3           | the row with the lowest Krum score                    |
| multi-krum     | n >= 2f + 3           | mean of the m rows with the lowest scores (m = n - f) |
| centered-clip  | n >= 2f + 1           | iterative clipping around a center                    |
| ss-clip        | n >= f + 2            | row 0 (own model) + clipped mean of the others' diffs |

Krum (Blanchard et al., NeurIPS 2017): the score of row i is the sum of its squared distances to
its n - f - 2 nearest other rows; it needs n > 2f + 2. Distances come from
`swarmnode.kernels.distance.pairwise_sq_dists`, which stays exact for near-identical rows.

Centered clipping (Karimireddy, He & Jaggi, ICML 2021): starting from a center v, repeat
v <- v + mean_i (x_i - v) * min(1, tau / ||x_i - v||). The paper starts from the previous
aggregate; a pure function has none, so we start from the coordinate-wise median (or `center`).
With `tau=None` each iteration uses the median distance to the current center, which keeps the
rule scale-free: the closer half of the rows moves the center freely, the farther half only by
tau each.

Self-centered clipping (`ss-clip`; He, Karimireddy & Jaggi 2022, "Byzantine-robust decentralized
learning via ClippedGossip"): row 0 is the caller's own model x; the result is
x + (1/n) sum_j clip(x_j - x, tau), clip(z, tau) = z min(1, tau / ||z||). Centred on the peer's
own model rather than on an estimate of the honest mean, it keeps the honest peers' diversity
(the mean of close-by non-iid models, which Krum throws away by picking one) while a liar moves x
by at most tau / n per round. With `tau=None`, tau is the (m - f)-th smallest of the m distances
||x_j - x||: at most f honest rows are clipped, and a liar is clipped to the scale of the honest
spread however far it lies, and a row farther than SS_CLIP_REJECT x tau gets no weight. Like every rule it drops NaN/Inf rows first (then the first finite
row is the center; the exchange's own row is always finite).

Column-wise work (median, trimmed mean, means) runs over blocks of coordinates, so memory beyond
the input stays at a few MB per block whatever d is; sums are accumulated in float64, except the
mean of clean float32 numpy rows: one BLAS sgemv in float32, within np.mean's own float32 error
bound ((n - 1) * 2**-24 * sum |x_i|; see gossip/robust/fast.py). mean, median and trimmed mean
first run on all rows and check their own intermediate result (column sums, sorted column
extremes) for NaN/Inf; only if one shows up (or a float32 sum overflows) do they drop the
non-finite rows and run again (the mean in float64), so clean inputs skip that pre-pass. median
and trimmed mean sort each block transposed, one contiguous row of n values per coordinate, or
for up to 24 numpy rows with a min/max sorting network over whole rows.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
from swarmnode.gossip.errors import AggregationError
from swarmnode.gossip.robust import chunked
from swarmnode.gossip.robust.fast import _column_means, _median_of_sorted, _sorted_columns
from swarmnode.kernels.distance import array_module, finite_rows, pairwise_sq_dists
from swarmnode.kernels.errors import SwarmnodeError

BLOCK_ELEMENTS = 1 << 20  # (rows x columns) per column block: ~4 MB of float32


Rule = Callable[..., Any]


# --- constraints -----------------------------------------------------------------------------


def min_peers(rule: str, f: int) -> int:
    """Fewest (finite) rows `rule` needs to tolerate `f` byzantine ones."""
    _check_f(f)
    if rule not in _MIN_PEERS:
        raise AggregationError(f"unknown aggregation rule {rule!r} (known: {', '.join(RULES)})")
    return _MIN_PEERS[rule](f)


def check_rule(rule: str, f: int, n: int) -> None:
    """Raise `AggregationError` unless `rule` can aggregate `n` rows with `f` byzantine."""
    need = min_peers(rule, f)
    if n < need:
        raise AggregationError(f"{rule} with f={f} needs at least {need} models, got n={n}")


_MIN_PEERS: dict[str, Callable[[int], int]] = {
    "mean": lambda f: 1,
    "median": lambda f: 2 * f + 1,
    "trimmed-mean": lambda f: 2 * f + 1,
    "krum": lambda f: 2 * f + 3,
    "multi-krum": lambda f: 2 * f + 3,
    "centered-clip": lambda f: 2 * f + 1,
    "ss-clip": lambda f: f + 2,
}


# --- Krum --------------------------------------------------------------------------------------


def krum_scores(updates: Any, f: int) -> np.ndarray:
    """(n,) float64 Krum scores; +inf for rows with NaN/Inf. Lower is more trustworthy."""
    X, _ = _prepare(updates, f)
    D = pairwise_sq_dists(X)
    finite = np.isfinite(np.diagonal(D))
    _require(X.shape[0], int(finite.sum()), f, "krum")
    idx = np.flatnonzero(finite)
    k = idx.size - f - 2
    sub = D[np.ix_(idx, idx)].copy()
    np.fill_diagonal(sub, np.inf)  # the row itself is not one of its neighbours
    nearest = np.partition(sub, k - 1, axis=1)[:, :k]
    scores = np.full(X.shape[0], np.inf)
    scores[idx] = nearest.sum(axis=1)
    return scores


def krum_select(updates: Any, f: int) -> int:
    """Index of the row Krum picks (lowest score; the first on ties)."""
    return int(np.argmin(krum_scores(updates, f)))


def krum(updates: Any, f: int) -> Any:
    """The single row with the lowest Krum score (a copy)."""
    X, _ = _prepare(updates, f)
    return X[krum_select(X, f)].copy()


def multi_krum(updates: Any, f: int, m: int | None = None) -> Any:
    """Mean of the `m` rows with the lowest Krum scores (default m = n_finite - f)."""
    X, xp = _prepare(updates, f)
    scores = krum_scores(X, f)
    n_finite = int(np.isfinite(scores).sum())
    m = n_finite - f if m is None else m
    if isinstance(m, bool) or not isinstance(m, (int, np.integer)) or not 1 <= m <= n_finite:
        raise AggregationError(f"multi-krum needs 1 <= m <= {n_finite} (finite rows), got m={m!r}")
    chosen = np.sort(np.argsort(scores, kind="stable")[:m])
    return _column_reduce(X, chosen, xp, _mean_block)


# --- coordinate-wise rules -----------------------------------------------------------------


def mean(updates: Any, f: int = 0) -> Any:
    """Average of the finite rows. Not robust: `f` is accepted for the common signature only."""
    X, xp = _prepare(updates, f)
    out = _column_means(X, xp)
    if out is not None:
        return out
    idx = _finite_index(X, f, "mean")
    return _column_reduce(X, idx, xp, _mean_block)


def median(updates: Any, f: int = 0) -> Any:
    """Coordinate-wise median of the finite rows (mean of the two middle values for even n)."""
    X, xp = _prepare(updates, f)
    return _sorted_rule(X, xp, f, "median", _median_of_sorted)


def trimmed_mean(updates: Any, f: int) -> Any:
    """Per coordinate: drop the f lowest and the f highest values, average the rest."""
    X, xp = _prepare(updates, f)

    def pick(T: Any, xp: Any) -> Any:
        n = T.shape[1]
        return T[:, f : n - f].mean(axis=1, dtype=xp.float64)

    return _sorted_rule(X, xp, f, "trimmed-mean", pick)


def centered_clip(
    updates: Any,
    f: int,
    tau: float | None = None,
    iters: int = 3,
    center: Any = None,
) -> Any:
    """Centered clipping (Karimireddy et al. 2021) over the finite rows; see the module doc."""
    X, xp = _prepare(updates, f)
    idx = _finite_index(X, f, "centered-clip")
    if isinstance(iters, bool) or not isinstance(iters, int) or iters < 1:
        raise AggregationError(f"centered-clip needs iters >= 1, got {iters!r}")
    if tau is not None and not tau > 0:
        raise AggregationError(f"centered-clip needs tau > 0, got {tau!r}")
    if center is None:
        v = _column_reduce(X, idx, xp, _median_block, out_dtype=xp.float64)
    else:
        v = xp.asarray(center, dtype=xp.float64).reshape(-1)
        if v.shape != (X.shape[1],):
            raise AggregationError(f"center has shape {v.shape}, expected ({X.shape[1]},)")
    for _ in range(iters):
        dist = xp.sqrt(_sq_dists_to(X, idx, v, xp))
        t = float(xp.median(dist)) if tau is None else float(tau)
        # min(1, tau/||x_i - v||), written so that a row sitting on the center gets weight 1
        scale = xp.minimum(1.0, t / xp.maximum(dist, 1e-300)) if t > 0 else xp.zeros_like(dist)
        v = v + _weighted_mean_of_diffs(X, idx, v, scale, xp)
    return v.astype(X.dtype)


def self_centered_clip(updates: Any, f: int, tau: float | None = None) -> Any:
    """SSClip around row 0 (the caller's own model); see the module doc."""
    X, xp = _prepare(updates, f)
    idx = _finite_index(X, f, "ss-clip")
    if tau is not None and not tau > 0:
        raise AggregationError(f"ss-clip needs tau > 0, got {tau!r}")
    v = X[int(idx[0])].astype(xp.float64)  # row 0 in the exchange (its own model is finite)
    dist = xp.sqrt(_sq_dists_to(X, idx, v, xp))
    t = _radius(dist, f) if tau is None else float(tau)
    scale = xp.minimum(1.0, t / xp.maximum(dist, 1e-300)) if t > 0 else xp.zeros_like(dist)
    scale = xp.where(dist > SS_CLIP_REJECT * t, 0.0, scale)  # far outliers: no say at all
    return (v + _weighted_mean_of_diffs(X, idx, v, scale, xp)).astype(X.dtype)


def clip_radius(updates: Any, f: int) -> float:
    """The tau `self_centered_clip(updates, f)` clips with: the (m - f)-th smallest distance from
    the first finite row to the m other finite rows. The exchange keeps it to clip what peers
    push to it between its own rounds."""
    X, xp = _prepare(updates, f)
    idx = _finite_index(X, f, "ss-clip")
    v = X[int(idx[0])].astype(xp.float64)
    return _radius(xp.sqrt(_sq_dists_to(X, idx, v, xp)), f)


def _radius(dist: Any, f: int) -> float:
    others = np.sort(np.asarray(dist[1:].get() if hasattr(dist, "get") else dist[1:]))
    return float(others[max(others.size - f, 1) - 1]) if others.size else 0.0


def clip_toward(own: np.ndarray, other: np.ndarray, tau: float) -> np.ndarray | None:
    """own + clip(other - own, tau): what a self-centered peer mixes in from one pushed model;
    None for a model farther than SS_CLIP_REJECT x tau (not mixed at all). Within tau that is
    `other` itself (not a copy: own + (other - own) is other); chunked (gossip/robust/chunked.py), so no
    100 MB temporaries."""
    dist = chunked.distance(own, other)
    if not dist <= SS_CLIP_REJECT * tau:  # NaN too: never mixed
        return None
    if dist <= tau:
        return other.astype(np.float32, copy=False)
    return chunked.toward(own, other, tau / dist)


# ss-clip gives a row farther than this many radii from the own model no weight at all. Clipping
# alone still lets a far liar pull by tau / n every round, always the same way: measured on the
# signal task (dirichlet:0.5, 5 peers, one ALIE z = 30 liar) that walked the swarm to 26%.
# An attacker inside the bound is still clipped to tau: what this removes is the far one's pull.
SS_CLIP_REJECT = 4.0


RULES: dict[str, Rule] = {
    "mean": mean,
    "median": median,
    "trimmed-mean": trimmed_mean,
    "krum": krum,
    "multi-krum": multi_krum,
    "centered-clip": centered_clip,
    "ss-clip": self_centered_clip,
}

# Rules whose result already holds the caller's own model (row 0) at its weight: the exchange
# takes their result as the new model (mix weight 1) rather than mixing it in again.
SELF_CENTERED = frozenset({"ss-clip"})


# --- helpers -------------------------------------------------------------------------------


def _prepare(updates: Any, f: int) -> tuple[Any, Any]:
    _check_f(f)
    try:
        xp = array_module(updates)
    except SwarmnodeError:
        raise AggregationError(
            f"updates must be a numpy or cupy array, got {type(updates).__name__}"
        ) from None
    if updates.ndim != 2 or updates.shape[0] < 1:
        raise AggregationError(f"updates must be an (n, d) array with n >= 1, got {updates.shape}")
    if updates.dtype not in (np.float32, np.float64):
        raise AggregationError(f"updates must be float32 or float64, got {updates.dtype}")
    return updates, xp


def _check_f(f: int) -> None:
    if isinstance(f, bool) or not isinstance(f, (int, np.integer)) or f < 0:
        raise AggregationError(f"f must be a non-negative integer, got {f!r}")


def _require(n: int, n_finite: int, f: int, rule: str) -> None:
    need = _MIN_PEERS[rule](f)
    if n_finite < need:
        dropped = f" after dropping {n - n_finite} rows with NaN/Inf" if n_finite < n else ""
        raise AggregationError(
            f"{rule} with f={f} needs at least {need} finite models; got n={n}{dropped}"
        )


def _finite_index(X: Any, f: int, rule: str) -> np.ndarray:
    idx = np.flatnonzero(finite_rows(X))
    _require(X.shape[0], idx.size, f, rule)
    return idx


def _column_reduce(
    X: Any, idx: np.ndarray, xp: Any, fn: Callable[[Any, Any], Any], out_dtype: Any = None
) -> Any:
    """out[c] = fn(X[idx, c]) over blocks of columns, so no (n, d) temporary is ever made."""
    d = X.shape[1]
    out = xp.empty(d, dtype=out_dtype or X.dtype)
    width = max(1, BLOCK_ELEMENTS // max(1, idx.size))
    rows = xp.asarray(idx) if xp is not np else idx
    contiguous = idx.size == X.shape[0]
    for start in range(0, d, width):
        stop = min(d, start + width)
        B = X[:, start:stop] if contiguous else X[rows, start:stop]
        out[start:stop] = fn(B, xp)
    return out


def _mean_block(B: Any, xp: Any) -> Any:
    return B.mean(axis=0, dtype=xp.float64)


def _median_block(B: Any, xp: Any) -> Any:
    """Column medians; the two middle values of an even count are averaged in float64."""
    S = xp.sort(B, axis=0)  # numpy's SIMD sort beats its partition-based median ~3x here
    k = S.shape[0]
    if k % 2:
        return S[k // 2]
    return (S[k // 2 - 1].astype(xp.float64) + S[k // 2]) / 2


def _sq_dists_to(X: Any, idx: np.ndarray, v: Any, xp: Any) -> Any:
    """||x_i - v||^2 for the rows idx, in float64, one column block at a time."""
    rows = xp.asarray(idx) if xp is not np else idx
    acc = xp.zeros(idx.size, dtype=xp.float64)
    width = max(1, BLOCK_ELEMENTS // max(1, idx.size))
    for start in range(0, X.shape[1], width):
        stop = min(X.shape[1], start + width)
        diff = X[rows, start:stop].astype(xp.float64) - v[start:stop]
        acc += xp.einsum("ij,ij->i", diff, diff)
    return acc


def _weighted_mean_of_diffs(X: Any, idx: np.ndarray, v: Any, w: Any, xp: Any) -> Any:
    """mean_i w_i (x_i - v) over the rows idx, in float64, one column block at a time."""
    rows = xp.asarray(idx) if xp is not np else idx
    out = xp.empty_like(v)
    width = max(1, BLOCK_ELEMENTS // max(1, idx.size))
    for start in range(0, X.shape[1], width):
        stop = min(X.shape[1], start + width)
        diff = X[rows, start:stop].astype(xp.float64) - v[start:stop]
        out[start:stop] = (w @ diff) / idx.size
    return out


def _sorted_rule(X: Any, xp: Any, f: int, rule: str, pick: Callable[[Any, Any], Any]) -> Any:
    """out[c] = pick(sorted column c) over the finite rows; see `_sorted_columns`.

    Sorting puts -Inf first and +Inf and NaN last, so a column whose sorted extremes are finite
    is finite throughout: the all-rows pass proves its own inputs clean.
    """
    if X.shape[0] >= _MIN_PEERS[rule](f):
        out = _sorted_columns(X, None, xp, pick)
        if out is not None:
            return out
    idx = _finite_index(X, f, rule)
    return _sorted_columns(X, idx, xp, pick)
