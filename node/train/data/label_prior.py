"""Logit adjustment for a label-skewed shard: each peer trains for the whole set's labels.

A peer on a non-iid shard (`--partition dirichlet:A`) sees a few classes far more often than the
whole training set holds them. Plain cross-entropy then teaches its model the shard's class
prior: within a few steps of a mix, the output layer leans towards the peer's own classes and
its accuracy on the (balanced) test set falls far below the swarm's mean model, and every
evaluation of a peer's own model lands somewhere in that swing (the algorithm:
docs/exchange.md, "Logit adjustment on a label-skewed shard"; the figures: docs/benchmarks.md,
"The default exchange, and logit adjustment").

The logit-adjusted loss (Menon et al. 2021, "Long-tail learning via logit adjustment"; used for
federated label skew by FedLC, Zhang et al. 2022) trains on logits + tau log(pi_shard / pi_all):
the shard's excess prior is carried by that constant, not learnt into the weights, so the model
keeps estimating the whole set's posterior. Evaluation and prediction use the plain logits. tau
= 1 is the Bayes-consistent choice, but it silences a class that a shard lacks entirely (its
logit sits so low that the shard never pushes it down), and no peer then learns to tell two
classes held by different peers apart. tau = 0.5, the default, keeps most of the gain without
that loss.

Only where the peer knows the whole set's prior: a `--shard` of a data set it loaded whole.
A peer on its own data file, or on all of it, trains with plain cross-entropy (no offset).
"""

from __future__ import annotations

import math

import numpy as np

# Added to every class count: a class the shard lacks gets a finite offset, log(0.5 / n_shard)
# against the set's prior, instead of -inf.
PSEUDO_COUNT = 0.5
MAX_TAU = 4.0


def check_tau(tau: float) -> float:
    """`tau` if it is a usable strength, else ValueError (0 turns the adjustment off)."""
    if not (isinstance(tau, int | float) and math.isfinite(tau) and 0.0 <= tau <= MAX_TAU):
        raise ValueError(f"logit adjustment must be a number in [0, {MAX_TAU:g}], got {tau!r}")
    return float(tau)


def logit_offsets(
    y_shard: np.ndarray, y_all: np.ndarray, n_classes: int, tau: float
) -> np.ndarray | None:
    """tau log(pi_shard / pi_all) per class (float32), or None where it would change nothing:
    tau 0, or a shard with the whole set's prior."""
    tau = check_tau(tau)
    if tau == 0.0 or len(y_shard) == 0 or len(y_all) == 0:
        return None
    shard = _prior(y_shard, n_classes)
    whole = _prior(y_all, n_classes)
    offsets = tau * (np.log(shard) - np.log(whole))
    if not np.any(np.abs(offsets) > 1e-6):
        return None
    return offsets.astype(np.float32)


def _prior(y: np.ndarray, n_classes: int) -> np.ndarray:
    counts = np.bincount(np.asarray(y, dtype=np.int64), minlength=n_classes)[:n_classes]
    smoothed = counts.astype(np.float64) + PSEUDO_COUNT
    return smoothed / smoothed.sum()
