"""`GainRatio` and `HalfBatchProbe`: what averaging S peers' gradients is worth, measured.

A swarm of S peers that average their models computes like one peer with an S x larger batch.
How much larger a step that batch is worth depends on how noisy one batch's gradient is: where
the gradient is mostly signal, S batches point where one does and the lr has nothing to gain;
where it is mostly noise, S batches cut the noise S-fold and S x the lr is the right step.
AdaScale (Johnson et al. 2020, "AdaScale SGD") measures it as the gain ratio

    r = (sigma^2 + |G|^2) / (sigma^2 / S + |G|^2),   1 <= r <= S,

with G the expected gradient and sigma^2 = E|g - G|^2 the variance of one batch's gradient g.
We keep its lr scale (lr x r) and not its stretched schedule: time to accuracy is counted here
at a fixed number of steps.

The estimate, per peer, from its own steps (no network): a probed step splits its batch into
two halves a and b and takes both gradients (the same samples, so the same compute on a CPU and
the same full-batch gradient, up to rounding). Their difference holds only noise:
E|g_a - g_b|^2 = sigma_1^2 (1/n_a + 1/n_b), with sigma_1^2 the one-sample variance, so the batch
variance is sigma^2 = |g_a - g_b|^2 n_a n_b / n^2, unbiased. Comparing consecutive steps'
gradients instead would be free, but counts the change of G between the steps as noise, and that
change is largest exactly where the lr has no headroom (a step that overshoots a sharp valley
flips the gradient): it would raise the lr where it must not.

|g|^2 and sigma^2 are smoothed with one exponential moving average each; r is a ratio of the
two, so their common start-up bias cancels and no correction is needed:
E|g|^2 = |G|^2 + sigma^2, hence r = E|g|^2 / (sigma^2 / S + max(E|g|^2 - sigma^2, 0)).

What it cannot see: stability. r says how much the extra samples are worth, not whether the
model can take a larger step at all (on a net already at the edge of its stable lr, r can be
2-3 and the larger step still diverges); `SwarmLR` bounds how fast it acts on r.
"""

from __future__ import annotations

import math
from typing import Any

from swarmnode.kernels.backend import array_module


class GainRatio:
    """Smoothed |g|^2 and sigma^2 of one peer's batches; `ratio(S)` from any thread (floats
    written whole), `observe` from the training thread."""

    def __init__(self, beta: float = 0.98) -> None:
        if not 0.0 <= beta < 1.0:
            raise ValueError(f"gain smoothing beta must be in [0, 1), got {beta}")
        self.beta = beta
        self.g_sq = 0.0  # EMA of |g|^2, not bias-corrected (the correction cancels in r)
        self.noise_sq = 0.0  # EMA of sigma^2
        self.seen = 0

    def observe(self, g_sq: float, noise_sq: float) -> None:
        """One probed batch: |g|^2 of its gradient and its estimated sigma^2."""
        if not (math.isfinite(g_sq) and math.isfinite(noise_sq)) or g_sq < 0 or noise_sq < 0:
            return  # a non-finite gradient is the trainer's to report, not the scale's to use
        b = self.beta
        self.g_sq = b * self.g_sq + (1.0 - b) * g_sq
        self.noise_sq = b * self.noise_sq + (1.0 - b) * noise_sq
        self.seen += 1

    def ratio(self, s: float) -> float:
        """The gain of averaging s batches, in [1, s]; 1 before any observation."""
        s = max(1.0, float(s))
        if self.seen == 0 or self.g_sq <= 0.0:
            return 1.0
        signal = max(self.g_sq - self.noise_sq, 0.0)
        return min(s, max(1.0, self.g_sq / (self.noise_sq / s + signal)))


class HalfBatchProbe:
    """The trainer's side of the estimate: it holds the first half's gradient, then merges the
    second half into the full batch's gradient and reports both figures to `gain`."""

    def __init__(self, gain: GainRatio) -> None:
        self.gain = gain
        self._held: Any = None  # one model-sized buffer, allocated at the first probe

    def hold(self, grad: Any) -> None:
        """Keep the first half's gradient (the second half's backward overwrites `grad`)."""
        if self._held is None or self._held.shape != grad.shape:
            self._held = array_module(grad).empty_like(grad)
        self._held[...] = grad

    def merge(self, grad: Any, n_a: int, n_b: int) -> None:
        """`grad` holds the second half's gradient; leave the whole batch's there, observe."""
        n = n_a + n_b
        held = self._held
        held -= grad  # g_a - g_b: noise only
        noise_sq = _sq_norm(held) * n_a * n_b / (n * n)
        held *= n_a / n
        grad += held  # g_b + n_a / n (g_a - g_b) = (n_a g_a + n_b g_b) / n
        self.gain.observe(_sq_norm(grad), noise_sq)


def _sq_norm(v: Any) -> float:
    return float(v.dot(v))
