"""Pairwise squared distances between peers' parameter vectors: the hot path of Krum.

`pairwise_sq_dists(X)` takes an (n, d) float32 numpy or cupy array and returns the (n, n)
float64 matrix of squared Euclidean distances, on the host (n is tens; ranking happens there).

Precision. Peers' models agree to ~1e-4 of their scale, so the plain Gram trick on the raw rows,
||a||^2 + ||b||^2 - 2 a.b, subtracts numbers ~1e8 times larger than the result: in float32 that
is pure noise (relative error ~ eps32 * 1e8 ~ 10; tests/kernels/test_distance.py shows it picking
the wrong Krum row). We therefore work on rows centered on a reference row r taken from the
middle of the swarm:

1. c_i = x_i - r in the input precision. For near-identical models this subtraction is *exact*
   (Sterbenz: y/2 <= x <= 2y implies x - y is representable), and where a coordinate is near
   zero the rounding error is relative to that coordinate's magnitude, not amplified.
2. G = sum over chunks of d of C_k C_k^T: each chunk's GEMM runs in float32 (fast; its error is
   ~eps32 * |c_i| |c_j| times a small growth factor), and the chunk results are accumulated in
   float64, so the error does not grow with d.
3. D_ij = G_ii + G_jj - 2 G_ij in float64. The cancellation error is now ~eps32 * (G_ii + G_jj),
   and with r inside the cluster G_ii = ||x_i - r||^2 is of the order of the distances we want:
   relative error ~1e-6 instead of ~10.

Step 3 needs r to be close to the rows whose mutual distances matter. r is the medoid of a small
coordinate subsample; after the full pass, if the medoid by the exact distances lies much farther
from r than its own neighbours (an adversarial row built to look central on the subsample, or a
far-away row 0), we recenter on that medoid and recompute once.

Non-finite rows get +inf for every distance involving them (diagonal included) and never enter
the other rows' distances: the reference is always a finite row, and a NaN or Inf elsewhere only
reaches its own row and column of G. Finite rows so large that float32 squares overflow trigger
a recomputation in float64.

Memory stays bounded: the centered chunk C_k is ~4 MB on the CPU (~32 MB on a GPU, sized to
stay in L2), whatever d is.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from swarmnode.kernels.errors import ShapeError

CPU_CHUNK_BYTES = 4 << 20  # centered block per GEMM: fits in L2/L3 next to the BLAS panels
GPU_CHUNK_BYTES = 32 << 20  # fits in an H100's 50 MB L2, so C_k is written and read on chip
SUBSAMPLE = 2048  # coordinates used to pick the reference row...
SUBSAMPLE_BLOCKS = 16  # ...in this many contiguous runs
RECENTER_RATIO = 16.0  # recenter when D[ref, medoid] > this * the medoid's typical distance


def pairwise_sq_dists(X: Any) -> np.ndarray:
    """(n, n) float64 squared distances between the rows of X (numpy or cupy, float32/64)."""
    xp = array_module(X)
    _check_input(X, xp)
    n = X.shape[0]
    if n == 0:
        return np.zeros((0, 0))
    # Overflow and inf - inf are expected for bad rows and are handled (+inf / float64 redo).
    with np.errstate(over="ignore", invalid="ignore"):
        ref = _pick_reference(X, xp)
        if ref is None:
            return np.full((n, n), np.inf)
        D, finite = _dists_around(X, ref, xp)
        medoid = _medoid(D, finite)
        if medoid != ref and _needs_recenter(D, finite, ref, medoid):
            D, finite = _dists_around(X, medoid, xp)
    return D


def finite_rows(X: Any) -> np.ndarray:
    """Host bool mask of the rows of X with no NaN/Inf, from one float64 row-sum pass.

    A row sum accumulated in float64 cannot overflow for float32 input (3.4e38 * 1e9 < 1.8e308)
    and NaN or +-Inf propagates into it, so a finite sum proves a finite row.
    """
    xp = array_module(X)
    sums = X.sum(axis=1, dtype=xp.float64)
    return _host(xp.isfinite(sums))


def array_module(x: Any) -> Any:
    """numpy for numpy arrays; cupy for cupy arrays (cupy is imported only when one is seen)."""
    if isinstance(x, np.ndarray):
        return np
    try:
        import cupy
    except ImportError:
        raise ShapeError(f"expected a numpy or cupy array, got {type(x).__name__}") from None
    xp = cupy.get_array_module(x)
    if xp is np:
        raise ShapeError(f"expected a numpy or cupy array, got {type(x).__name__}")
    return xp


# --- the pass around one reference row ---------------------------------------------------------


def _dists_around(X: Any, ref: int, xp: Any) -> tuple[np.ndarray, np.ndarray]:
    """(D, finite-row mask) from the Gram matrix of the rows centered on row `ref`."""
    G = _centered_gram(X, X[ref], xp, X.dtype)
    diag = _host(xp.diagonal(G))
    overflow = ~np.isfinite(diag)
    finite = np.ones(X.shape[0], dtype=bool)
    for i in np.flatnonzero(overflow):
        finite[i] = bool(xp.isfinite(X[i]).all())
    if np.any(overflow & finite) and X.dtype != np.float64:
        G = _centered_gram(X, X[ref], xp, np.float64)  # squares overflowed float32: redo wide
    D = gram_to_sq_dists(G, finite=xp.asarray(finite))
    return _host(D), finite


def _centered_gram(X: Any, r: Any, xp: Any, dtype: Any) -> Any:
    """G = (X - r)(X - r)^T in float64, from chunked GEMMs in `dtype`."""
    n, d = X.shape
    chunk_bytes = CPU_CHUNK_BYTES if xp is np else GPU_CHUNK_BYTES
    width = max(256, chunk_bytes // (np.dtype(dtype).itemsize * max(n, 1)))
    width = min(width, max(d, 1))
    G = xp.zeros((n, n), dtype=xp.float64)
    block = xp.empty((n, width), dtype=dtype)
    for start in range(0, d, width):
        stop = min(d, start + width)
        C = block[:, : stop - start]
        xp.subtract(X[:, start:stop], r[start:stop], out=C, dtype=dtype)  # exact: see module doc
        G += C @ C.T  # numpy/cupy run A @ A.T as one SYRK/GEMM call
    return G


def gram_to_sq_dists(G: Any, *, finite: Any) -> Any:
    """D_ij = G_ii + G_jj - 2 G_ij, clamped at 0; +inf on rows/cols not `finite`; 0 diagonal.

    On cupy this is one small RawKernel (`_gram_to_sq_dists_cuda`); on numpy, the reference.
    """
    xp = array_module(G)
    if xp is not np:
        return _gram_to_sq_dists_cuda(G, finite)
    diag = np.diagonal(G)
    with np.errstate(over="ignore", invalid="ignore"):  # bad rows: overwritten with +inf below
        D = diag[:, None] + diag[None, :] - 2.0 * G
    np.maximum(D, 0.0, out=D)  # rounding can leave tiny negatives; a squared distance cannot
    np.fill_diagonal(D, 0.0)
    ok = finite & np.isfinite(diag)
    D[~ok, :] = np.inf
    D[:, ~ok] = np.inf
    return D


# --- picking the reference row -----------------------------------------------------------------


def _pick_reference(X: Any, xp: Any) -> int | None:
    """A finite row near the middle of the rows: the medoid of a coordinate subsample."""
    n, d = X.shape
    cols = _subsample_columns(d)
    S = _host(X[:, cols if xp is np else xp.asarray(cols)]).astype(np.float64)
    sub_finite = np.isfinite(S).all(axis=1)
    # float64 distances on the subsample, centered on one of its rows: only a heuristic choice
    # (the full pass checks it), but already accurate to ~1e-12 for near-identical rows.
    C = S[sub_finite] - S[sub_finite][:1]
    G = C @ C.T
    Ds = np.full((n, n), np.inf)
    Ds[np.ix_(sub_finite, sub_finite)] = np.diagonal(G)[:, None] + np.diagonal(G)[None, :] - 2 * G
    for i in _centrality_order(Ds, sub_finite):
        if bool(xp.isfinite(X[i]).all()):
            return int(i)
    return None  # no finite row at all


def _subsample_columns(d: int) -> np.ndarray:
    """SUBSAMPLE column indices in SUBSAMPLE_BLOCKS contiguous runs spread over [0, d).

    Runs rather than a stride: a strided gather touches one cache line (and TLB entry) per
    element and cost 130 ms on a 64 x 1e6 matrix here; runs of 128 columns cost well under 1 ms.
    """
    if d <= SUBSAMPLE:
        return np.arange(d)
    run = SUBSAMPLE // SUBSAMPLE_BLOCKS
    starts = np.linspace(0, d - run, SUBSAMPLE_BLOCKS).astype(np.int64)
    return (starts[:, None] + np.arange(run)[None, :]).reshape(-1)


def _centrality_order(D: np.ndarray, finite: np.ndarray) -> list[int]:
    """Finite rows from most to least central: sum of distances to their nearest half."""
    idx = np.flatnonzero(finite)
    if idx.size == 0:
        return []
    k = max(1, idx.size // 2)
    sub = D[np.ix_(idx, idx)]
    np.fill_diagonal(sub, np.inf)  # a row is not its own neighbour
    if idx.size == 1:
        return [int(idx[0])]
    nearest = np.sort(sub, axis=1)[:, :k]
    scores = nearest.sum(axis=1)
    return [int(idx[j]) for j in np.argsort(scores, kind="stable")]


def _medoid(D: np.ndarray, finite: np.ndarray) -> int:
    order = _centrality_order(D, finite)
    return order[0] if order else 0


def _needs_recenter(D: np.ndarray, finite: np.ndarray, ref: int, medoid: int) -> bool:
    """Is the reference so far from the cluster that cancellation could blur distances in it?"""
    others = finite.copy()
    others[medoid] = False
    if not others.any():
        return False
    k = max(1, int(others.sum()) // 2)
    typical = float(np.median(np.sort(D[medoid, others])[:k]))
    return bool(D[ref, medoid] > RECENTER_RATIO * typical)


# --- checks and the CUDA kernel ----------------------------------------------------------------


def _check_input(X: Any, xp: Any) -> None:
    if X.ndim != 2:
        raise ShapeError(f"pairwise_sq_dists needs an (n, d) array, got shape {X.shape}")
    if X.dtype not in (np.float32, np.float64):
        raise ShapeError(f"pairwise_sq_dists needs float32 or float64, got {X.dtype}")


def _host(a: Any) -> np.ndarray:
    return a if isinstance(a, np.ndarray) else a.get()


_CUDA_SOURCE = r"""
extern "C" __global__
void gram_to_sq_dists(const double* G, const bool* finite, double* D, const int n) {
    const int i = blockIdx.y * blockDim.y + threadIdx.y;
    const int j = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n || j >= n) return;
    const double gi = G[i * n + i];
    const double gj = G[j * n + j];
    double v;
    if (!finite[i] || !finite[j] || !isfinite(gi) || !isfinite(gj)) {
        v = __longlong_as_double(0x7ff0000000000000LL);  // +inf, without needing headers
    } else if (i == j) {
        v = 0.0;
    } else {
        v = fmax(gi + gj - 2.0 * G[i * n + j], 0.0);
    }
    D[i * n + j] = v;
}
"""
_kernel_cache: dict[int, Any] = {}


def _gram_to_sq_dists_cuda(G: Any, finite: Any) -> Any:
    """Checked launch of the RawKernel: cupy checks nothing, so we check dtype, layout, shape."""
    import cupy

    if G.ndim != 2 or G.shape[0] != G.shape[1]:
        raise ShapeError(f"gram_to_sq_dists needs a square matrix, got {G.shape}")
    n = G.shape[0]
    if G.dtype != cupy.float64 or not G.flags.c_contiguous:
        raise ShapeError("gram_to_sq_dists needs a C-contiguous float64 cupy matrix")
    finite = cupy.ascontiguousarray(cupy.asarray(finite, dtype=cupy.bool_))
    if finite.shape != (n,):
        raise ShapeError(f"finite mask has shape {finite.shape}, expected ({n},)")
    device = cupy.cuda.Device().id
    if device not in _kernel_cache:
        _kernel_cache[device] = cupy.RawKernel(_CUDA_SOURCE, "gram_to_sq_dists")
    D = cupy.empty((n, n), dtype=cupy.float64)
    block = (16, 16)
    grid = ((n + 15) // 16, (n + 15) // 16)
    _kernel_cache[device](grid, block, (G, finite, D, np.int32(n)))
    return D
