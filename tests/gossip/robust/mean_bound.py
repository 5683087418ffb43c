"""What the mean of float32 rows promises against the exact mean, per column.

The mean of clean float32 numpy rows sums in float32 (one BLAS sgemv, gossip/robust/fast.py),
as np.mean(X, axis=0) does. Any order of an n-term float32 sum, np.mean's row-by-row one
included, errs by at most gamma(n - 1) * sum_i |x_i| with gamma(k) = k u / (1 - k u) and
u = 2**-24 (Higham, "Accuracy and Stability of Numerical Algorithms", 4.2); the division by n
adds one rounding of the result. That bound is the promise: no worse than np.mean's.
"""

from __future__ import annotations

import math

import numpy as np

U32 = 2.0**-24  # float32 unit roundoff


def exact_mean(X: np.ndarray) -> np.ndarray:
    """Column means of X's values: math.fsum sums exactly, the division rounds once in float64."""
    return np.array([math.fsum(col) for col in X.T.astype(np.float64)]) / X.shape[0]


def float32_mean_bound(X: np.ndarray, exact: np.ndarray) -> np.ndarray:
    """Per column, the most a float32 mean of X's rows may differ from `exact` (its exact mean)."""
    n = X.shape[0]
    gamma = (n - 1) * U32 / (1 - (n - 1) * U32)
    sum_abs = np.abs(X.astype(np.float64)).sum(axis=0)
    # (1 + 1e-9): the float64 arithmetic of this bound itself; 2**-149: a subnormal result
    return ((gamma * sum_abs / n) * (1 + U32) + U32 * np.abs(exact)) * (1 + 1e-9) + 2.0**-149
