"""Logit adjustment on a label-skewed shard (node/train/data/label_prior.py): the offsets, the loss
they change (and the evaluation they must not), and what they are for."""

from __future__ import annotations

import math

import numpy as np
import pytest
from swarmnode.kernels.backend import select_backend
from swarmnode.kernels.layers import softmax_cross_entropy
from swarmnode.node.train.build import build_trainer, load_shard
from swarmnode.node.train.config import NodeConfig
from swarmnode.node.train.data.label_prior import PSEUDO_COUNT, check_tau, logit_offsets
from swarmnode.node.train.errors import ConfigError
from swarmnode.node.train.model.builtin import build_model

pytestmark = pytest.mark.timeout(60)


def test_a_shard_with_the_whole_sets_prior_or_tau_zero_gets_no_offsets() -> None:
    y = np.repeat(np.arange(5), 10)
    assert logit_offsets(y[::2], y, 5, 0.5) is None  # the same mix of labels
    assert logit_offsets(y[:20], y, 5, 0.0) is None  # off
    assert logit_offsets(y, y, 5, 1.0) is None  # all of the data


def test_offsets_are_tau_log_of_the_shards_over_the_sets_prior() -> None:
    y_all = np.repeat(np.arange(4), 25)  # uniform over 4 classes
    y_shard = np.array([0] * 30 + [1] * 12)  # classes 2 and 3 absent
    off = logit_offsets(y_shard, y_all, 4, 0.5)
    assert off is not None and off.dtype == np.float32 and off.shape == (4,)
    shard = np.array([30, 12, 0, 0]) + PSEUDO_COUNT
    want = 0.5 * np.log((shard / shard.sum()) / 0.25)
    np.testing.assert_allclose(off, want, rtol=1e-6)
    assert off[0] > off[1] > 0 > off[2] == off[3]  # an absent class: finite, lowest
    np.testing.assert_allclose(logit_offsets(y_shard, y_all, 4, 1.0), 2 * off, rtol=1e-6)


@pytest.mark.parametrize("tau", [-0.1, 4.5, math.nan, math.inf, "1"])
def test_a_bad_strength_is_refused_by_the_function_and_the_config(tau: object) -> None:
    with pytest.raises(ValueError):
        check_tau(tau)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="`logit_adjust`"):
        NodeConfig(logit_adjust=tau).validate()  # type: ignore[arg-type]


def test_the_offset_shifts_the_loss_only_and_its_gradient_is_the_shifted_logits() -> None:
    be = select_backend("cpu")
    model = build_model("mlp:8", (6,), 3, be, seed=1)
    rng = np.random.default_rng(0)
    x, y = rng.standard_normal((5, 6)).astype(np.float32), np.array([0, 1, 2, 2, 1])
    off = np.array([1.0, -2.0, 0.5], dtype=np.float32)
    logits = model.forward(x)
    want_loss, _ = softmax_cross_entropy(logits + off, y)
    assert model.loss_and_grad(x, y, off) == pytest.approx(want_loss, rel=1e-6)
    with_off = model.params.grad.copy()
    # the same gradient as a model whose last bias holds the offset (the logits' only constant)
    model.layers[-1].p["b"][...] += off
    model.loss_and_grad(x, y)
    np.testing.assert_allclose(with_off, model.params.grad, rtol=1e-5, atol=1e-7)
    model.layers[-1].p["b"][...] -= off
    plain = model.evaluate(x, y)
    assert model.evaluate(x, y) == plain  # evaluation never sees the offset
    assert model.loss_and_grad(x, y, off) != pytest.approx(model.loss_and_grad(x, y), rel=1e-6)


def _cfg(**kw: object) -> NodeConfig:
    base = dict(model="mlp:32", device="cpu", data="digits", steps=0, lr=0.05, seed=0)
    return NodeConfig(**{**base, **kw}).validate()  # type: ignore[arg-type]


def test_build_sets_offsets_on_a_skewed_shard_only() -> None:
    skewed = dict(shard=(1, 4), partition="dirichlet:0.3")
    trainer, _, _ = build_trainer(_cfg(**skewed))
    assert trainer.logit_offset is not None and trainer.logit_offset.shape == (10,)
    assert build_trainer(_cfg(**skewed, logit_adjust=0.0))[0].logit_offset is None
    assert build_trainer(_cfg())[0].logit_offset is None  # all of the data: nothing to adjust


def _predicted_share_of_own_classes(adjust: float) -> float:
    """After 150 steps on a skewed quarter of digits: the share of the test set's predictions
    that fall in the shard's three most frequent classes."""
    cfg = _cfg(shard=(0, 4), partition="dirichlet:0.3", logit_adjust=adjust)
    trainer, data, _ = build_trainer(cfg)
    for _ in range(150):
        trainer.step()
    _, _, y_shard = load_shard(cfg)
    top = np.argsort(np.bincount(y_shard, minlength=10))[-3:]
    pred = np.asarray(trainer.model.predict(data.X_test))
    return float(np.isin(pred, top).mean())


def test_the_adjusted_peer_does_not_learn_its_shards_class_mix() -> None:
    # what it is for: a plain peer on its skewed shard predicts its own classes for far more
    # than their share of the (balanced) test set; the adjusted one much less so
    plain, adjusted = _predicted_share_of_own_classes(0.0), _predicted_share_of_own_classes(1.0)
    assert plain > 0.45  # 3 classes of 10: 0.3 of a balanced test set
    assert adjusted < plain - 0.1, (plain, adjusted)
