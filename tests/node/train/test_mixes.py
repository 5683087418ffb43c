"""`MixAccumulator` (node/train/mixing/mixes.py): folding mixes as they arrive equals applying
them one by one in arrival order, with one buffer of memory whatever their number."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from swarmnode.node.train.mixing.mixes import MixAccumulator, axpby

pytestmark = pytest.mark.timeout(60)
D = 64


@settings(max_examples=200, deadline=None)
@given(
    weights=st.lists(st.floats(0.01, 1.0), min_size=1, max_size=8),
    seed=st.integers(0, 2**32 - 1),
)
def test_folded_mixes_equal_the_mixes_applied_one_by_one(weights, seed):
    rng = np.random.default_rng(seed)
    x0 = rng.normal(size=D).astype(np.float32)
    others = [rng.normal(size=D).astype(np.float32) for _ in weights]
    expected = x0.astype(np.float64)
    for y, w in zip(others, weights, strict=True):
        expected = (1 - w) * expected + w * y.astype(np.float64)
    acc = MixAccumulator(np, D)
    for y, w in zip(others, weights, strict=True):
        acc.add(y, w)
    x = x0.copy()
    assert acc.apply_to(x)
    np.testing.assert_allclose(x, expected, rtol=1e-5, atol=1e-5)
    assert acc.folded == len(weights)


def test_apply_resets_and_later_mixes_start_afresh():
    acc = MixAccumulator(np, D)
    x = np.ones(D, np.float32)
    assert not acc.apply_to(x)  # nothing pending: untouched
    np.testing.assert_array_equal(x, 1.0)
    acc.add(np.full(D, 3.0, np.float32), 0.5)
    assert acc.pending and acc.apply_to(x) and not acc.pending
    np.testing.assert_allclose(x, 2.0)
    acc.add(np.zeros(D, np.float32), 0.5)
    acc.apply_to(x)
    np.testing.assert_allclose(x, 1.0)  # the first mix is not applied twice


def test_the_buffer_is_allocated_once_and_received_models_are_not_kept():
    acc = MixAccumulator(np, D)
    y = np.full(D, 2.0, np.float32)
    acc.add(y, 0.5)
    buf = acc._acc
    y[...] = 1e9  # the caller may reuse or free its buffer at once
    acc.add(np.zeros(D, np.float32), 0.5)
    assert acc._acc is buf
    x = np.zeros(D, np.float32)
    acc.apply_to(x)
    np.testing.assert_allclose(x, 0.5)  # 0.25 * 0 + 0.25 * 2 + 0.5 * 0


def test_discard_drops_what_is_pending():
    acc = MixAccumulator(np, D)
    acc.add(np.ones(D, np.float32), 1.0)
    acc.discard()
    x = np.zeros(D, np.float32)
    assert not acc.apply_to(x)
    np.testing.assert_array_equal(x, 0.0)


@pytest.mark.parametrize(
    ("value", "weight", "match"),
    [
        (np.ones(D + 1), 0.5, "mix of 65 values"),
        (np.ones(D), 0.0, "weight"),
        (np.ones(D), 1.5, "weight"),
    ],
)
def test_bad_mixes_are_refused_before_touching_anything(value, weight, match):
    acc = MixAccumulator(np, D)
    with pytest.raises(ValueError, match=match):
        acc.add(value, weight)
    assert not acc.pending


@settings(max_examples=100, deadline=None)
@given(
    ops=st.lists(st.tuples(st.booleans(), st.floats(0.01, 1.0)), min_size=1, max_size=8),
    seed=st.integers(0, 2**32 - 1),
)
def test_nudges_and_mixes_fold_in_arrival_order(ops, seed):
    rng = np.random.default_rng(seed)
    x0 = rng.normal(size=D).astype(np.float32)
    vecs = [rng.normal(size=D).astype(np.float32) for _ in ops]
    expected = x0.astype(np.float64)
    acc = MixAccumulator(np, D)
    for (is_nudge, w), v in zip(ops, vecs, strict=True):
        if is_nudge:
            expected = expected + w * v.astype(np.float64)
            acc.nudge(v, w)
        else:
            expected = (1 - w) * expected + w * v.astype(np.float64)
            acc.add(v, w)
    x = x0.copy()
    assert acc.apply_to(x)
    np.testing.assert_allclose(x, expected, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize(("value", "weight"), [(np.zeros(D + 1, np.float32), 0.5),
                                               (np.zeros(D, np.float32), 0.0)])  # fmt: skip
def test_bad_nudges_are_refused(value, weight):
    acc = MixAccumulator(np, D)
    with pytest.raises(ValueError):
        acc.nudge(value, weight)
    assert not acc.pending


def test_axpby_is_one_pass_in_place_and_the_numpy_fallback_agrees():
    rng = np.random.default_rng(1)
    x, y = rng.normal(size=(2, 1001)).astype(np.float32)
    want = 0.3 * x.astype(np.float64) + 0.7 * y
    fast = x.copy()
    axpby(fast, y, 0.3, 0.7)  # contiguous float32: NumKong
    slow = np.repeat(x, 2)[::2]  # a strided view: numpy
    axpby(slow, np.repeat(y, 2)[::2], 0.3, 0.7)
    np.testing.assert_allclose(fast, want, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(slow, want, rtol=1e-6, atol=1e-6)


@settings(max_examples=100, deadline=None)
@given(
    weights=st.lists(st.floats(0.01, 1.0), min_size=1, max_size=6),
    seed=st.integers(0, 2**32 - 1),
)
def test_counted_folds_add_exactly_the_move_they_make_however_many_are_pending(weights, seed):
    # A burst of pushes folded before the first of them lands: each one's move is counted
    # against the model as it will stand (x with what is pending), so their sum is the move
    # the apply makes. Counted against x alone (the old race) the sum overshoots it.
    from swarmnode.gossip.exchange import Moved

    rng = np.random.default_rng(seed)
    x = rng.normal(size=D).astype(np.float32)
    before = x.copy()
    acc, moved = MixAccumulator(np, D), Moved()
    for w in weights:
        acc.add(rng.normal(size=D).astype(np.float32), w, "peer", x=x, moved=moved)
    assert acc.apply_to(x)
    counted = np.zeros(D, np.float32)
    moved.take_from(counted)  # counted <- -m
    np.testing.assert_allclose(-counted, x - before, rtol=1e-4, atol=1e-4)


def test_an_uncounted_fold_leaves_the_round_s_count_alone():
    from swarmnode.gossip.exchange import Moved

    acc, moved = MixAccumulator(np, D), Moved()
    acc.add(np.ones(D, np.float32), 0.5)  # a round's own mix: nothing to count
    acc.add(np.ones(D, np.float32), 0.5, x=np.zeros(D, np.float32), moved=None)
    probe = np.zeros(D, np.float32)
    moved.take_from(probe)
    assert not probe.any()
