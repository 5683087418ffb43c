"""The gain ratio (`--lr-scale adaptive`, AdaScale): the estimator, the trainer's half-batch
probe, and `SwarmLR` acting on it."""

from __future__ import annotations

import math

import numpy as np
import pytest
from swarmnode.kernels.backend import select_backend
from swarmnode.kernels.optim import make_optimizer
from swarmnode.node.train.lr.gain import GainRatio, HalfBatchProbe
from swarmnode.node.train.lr.scale import SwarmLR
from swarmnode.node.train.model.builtin import build_model
from swarmnode.node.train.trainer import Trainer
from swarmnode.node.train.worker import TrainingWorker

pytestmark = pytest.mark.timeout(60)


def test_noise_free_gradients_gain_nothing_from_more_peers():
    gain = GainRatio()
    for g_sq in (5.0, 3.0, 4.0):
        gain.observe(g_sq, 0.0)
    assert [gain.ratio(s) for s in (1, 2, 4, 8)] == [1.0, 1.0, 1.0, 1.0]


def test_pure_noise_gains_the_full_swarm_size():
    gain = GainRatio()
    for _ in range(10):
        gain.observe(2.0, 2.0)  # E|g|^2 = sigma^2: no signal at all
    assert gain.ratio(4) == pytest.approx(4.0)
    assert gain.ratio(8) == pytest.approx(8.0)


def test_the_ratio_is_adascales_formula_and_needs_no_warm_up_of_its_averages():
    gain = GainRatio(beta=0.9)
    gain.observe(4.0, 3.0)  # |G|^2 = 1, sigma^2 = 3: after one observation, the EMAs'
    # common start-up factor (1 - beta) cancels in the ratio
    assert gain.ratio(4) == pytest.approx((3 + 1) / (3 / 4 + 1))
    assert gain.ratio(1) == 1.0  # alone: nothing to gain


def test_nothing_observed_or_nonsense_observed_means_no_gain():
    gain = GainRatio()
    assert gain.ratio(8) == 1.0
    for bad in ((math.nan, 1.0), (1.0, math.inf), (-1.0, 0.5), (1.0, -0.5)):
        gain.observe(*bad)
    assert gain.seen == 0 and gain.ratio(8) == 1.0
    gain.observe(1.0, 5.0)  # noise estimated above |g|^2 (an unlucky batch): clipped to [1, S]
    assert 1.0 <= gain.ratio(4) <= 4.0
    with pytest.raises(ValueError):
        GainRatio(beta=1.0)


@pytest.mark.parametrize("batch", [32, 33])
def test_the_half_batch_probe_recovers_a_known_noise_level(batch):
    """Per-sample gradients G + noise with a known one-sample variance: the merged gradient is
    the whole batch's mean, and the ratio lands on AdaScale's value for the true figures."""
    rng = np.random.default_rng(0)
    dim, sigma1 = 200, 1.0
    G = np.full(dim, 0.05)  # |G|^2 = 0.5; batch variance sigma^2 = dim sigma1^2 / batch
    gain = GainRatio(beta=0.99)
    probe = HalfBatchProbe(gain)
    h = batch // 2
    for _ in range(1000):
        samples = G + sigma1 * rng.standard_normal((batch, dim))
        grad = samples[h:].mean(axis=0)
        probe.hold(samples[:h].mean(axis=0))
        probe.merge(grad, h, batch - h)
        np.testing.assert_allclose(grad, samples.mean(axis=0), atol=1e-12)
    sigma_sq = dim * sigma1**2 / batch
    want = (sigma_sq + G @ G) / (sigma_sq / 4 + G @ G)
    assert gain.noise_sq / gain.g_sq == pytest.approx(sigma_sq / (sigma_sq + G @ G), rel=0.05)
    assert gain.ratio(4) == pytest.approx(want, rel=0.1)


def _trainer(X: np.ndarray, y: np.ndarray, seed: int = 0) -> Trainer:
    backend = select_backend("cpu")
    model = build_model("mlp:16", (X.shape[1],), 4, backend, seed)
    opt = make_optimizer("sgd", model.params, 0.05, momentum=0.9)
    return Trainer(model, opt, X, y, 32, seed, backend=backend)


def _task(n: int = 256, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, 12)).astype(np.float32)
    return X, (X[:, :4].argmax(axis=1)).astype(np.int64)


def test_a_probed_step_takes_the_same_step_as_a_plain_one():
    X, y = _task()
    plain, probed = _trainer(X, y), _trainer(X, y)
    gain = GainRatio()
    probed.grad_probe = HalfBatchProbe(gain)
    for _ in range(40):
        assert probed.step() == pytest.approx(plain.step(), rel=1e-5)
    np.testing.assert_allclose(probed.model.params.data, plain.model.params.data, atol=1e-5)
    assert gain.seen == 40 and 1.0 < gain.ratio(4) <= 4.0  # real minibatches are noisy


def test_a_trainer_whose_batches_all_agree_measures_no_gain():
    """Every sample the same: both half-batches give the same gradient, the noise is 0 and
    the lr must not grow, however many peers there are."""
    X, y = _task(n=1)
    X, y = np.repeat(X, 64, axis=0), np.repeat(y, 64)
    t = _trainer(X, y)
    gain = GainRatio()
    t.grad_probe = HalfBatchProbe(gain)
    for _ in range(20):
        t.step()
    assert gain.noise_sq <= 1e-9 * gain.g_sq
    assert gain.ratio(8) == pytest.approx(1.0, abs=1e-6)


def test_adaptive_scale_follows_the_gain_within_the_swarm_size_and_the_warm_up():
    s = SwarmLR("adaptive", max_n=8, warmup=4)
    assert s.probe is None and s.advance() == 1.0  # alone: no probe, the base lr exactly
    s.set_size(4)
    assert isinstance(s.probe, HalfBatchProbe) and s.probe.gain is s.gain
    for _ in range(5):
        s.gain.observe(2.0, 2.0)  # pure noise: the gain is the full 4
    assert [s.advance() for _ in range(5)] == [1.75, 2.5, 3.25, 4.0, 4.0]
    for _ in range(500):
        s.gain.observe(4.0, 0.0)  # the gradient turned to pure signal: nothing to gain
    assert s.advance() == pytest.approx(1.0, abs=1e-3)  # falls at once, like a leave
    s.set_size(10_000)  # sybil members: the cap still bounds the gain
    for _ in range(500):
        s.gain.observe(1.0, 1.0)  # pure noise again (the EMA still remembers a trace of signal)
    for _ in range(10):
        s.advance()
    assert 7.9 < s.scale <= 8.0


def _worked(t: Trainer, scale: SwarmLR, steps: int = 30) -> Trainer:
    w = TrainingWorker(t, eval_every=10_000, max_steps=steps)
    w.lr_scale = scale
    w.start()
    assert w.join(timeout=30) and w.error is None
    return t


def test_the_worker_probes_and_scales_only_in_a_swarm():
    X, y = _task()
    alone = _worked(_trainer(X, y), SwarmLR("adaptive", max_n=8, warmup=10))
    plain = _worked(_trainer(X, y), SwarmLR("none"))
    assert alone.grad_probe is None  # a peer alone steps exactly as without the rule
    np.testing.assert_array_equal(alone.model.params.data, plain.model.params.data)
    scale = SwarmLR("adaptive", max_n=8, warmup=10)
    scale.set_size(4)
    t = _worked(_trainer(X, y), scale)
    assert scale.gain.seen == 30
    assert t.optimizer.lr == pytest.approx(0.05 * scale.scale)
    assert 1.0 < scale.scale <= 4.0
