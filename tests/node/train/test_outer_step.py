"""`node.train.mixing.mixes.OuterStep`: the outer Nesterov step on the mixed model, and the worker's
use of it."""

from __future__ import annotations

import numpy as np
import pytest
from swarmnode.node.train.mixing.mixes import OuterStep

pytestmark = pytest.mark.timeout(10)


def test_lr_one_and_no_momentum_leave_the_mixed_model_as_it_is():
    outer = OuterStep(np)
    x = np.zeros(5, dtype=np.float32)
    outer.reset(x)
    x[...] = 3.0  # local steps and mixes moved it
    outer.apply(x, 1.0, 0.0)
    np.testing.assert_array_equal(x, 3.0)


def test_momentum_follows_the_nesterov_formula():
    outer = OuterStep(np)
    x = np.zeros(3, dtype=np.float64)
    outer.reset(x)
    m, a = np.zeros(3), np.zeros(3)
    for target in (1.0, 1.5, 3.0):
        x[...] = target
        d = a - x
        m = 0.9 * m + d
        expected = a - 0.7 * (d + 0.9 * m)
        outer.apply(x, 0.7, 0.9)
        np.testing.assert_allclose(x, expected)
        a = expected.copy()
    assert outer.steps == 3


def test_reset_forgets_the_momentum():
    outer = OuterStep(np)
    x = np.zeros(2)
    outer.reset(x)
    x[...] = 1.0
    outer.apply(x, 0.7, 0.9)
    outer.reset(x)
    before = x.copy()
    outer.apply(x, 0.7, 0.9)  # no progress since the reset: nothing moves
    np.testing.assert_array_equal(x, before)
    outer.forget()  # a state sync replaced the model: the next step only sets the anchor
    x[...] = 5.0
    outer.apply(x, 0.7, 0.9)
    np.testing.assert_array_equal(x, 5.0)


def test_back_is_a_host_copy_of_the_momentum_and_none_before_any_step():
    outer = OuterStep(np)
    x = np.zeros(3, dtype=np.float32)
    assert outer.back() is None
    outer.apply(x, 0.7, 0.5)  # the first step only sets the anchor
    assert outer.back() is None
    x[...] = 1.0  # progress: the momentum points back, from x to where it was
    outer.apply(x, 0.7, 0.5)
    back = outer.back()
    np.testing.assert_allclose(back, -1.0)
    back[...] = 7.0  # a copy: the outer step's own momentum is untouched
    np.testing.assert_allclose(outer.back(), -1.0)
