"""Aggregation rules: non-finite rows, the constraints on n and f, bad inputs."""

from __future__ import annotations

import numpy as np
import pytest
from swarmnode.gossip.errors import AggregationError
from swarmnode.gossip.robust import aggregate
from swarmnode.gossip.robust.aggregate import (
    RULES,
    check_rule,
    krum_scores,
    krum_select,
    min_peers,
)
from swarmnode.kernels.errors import SwarmnodeError

from tests.gossip.robust.test_aggregate import ref_centered_clip, ref_median, ref_trimmed_mean

# --- non-finite rows -----------------------------------------------------------------------------


@pytest.mark.parametrize("rule", sorted(RULES))
@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_non_finite_rows_are_dropped_before_aggregating(rule: str, bad: float) -> None:
    rng = np.random.default_rng(4)
    clean = rng.standard_normal((7, 25)).astype(np.float32)
    X = np.insert(clean, [0, 4], np.ones((2, 25), dtype=np.float32), axis=0)
    X[0, 3] = bad
    X[5, 24] = bad  # row 5 is the second inserted row
    f = 1
    np.testing.assert_allclose(RULES[rule](X, f), RULES[rule](clean, f), rtol=1e-6, atol=1e-7)


def test_krum_never_scores_or_selects_a_non_finite_row() -> None:
    X = np.zeros((6, 10), dtype=np.float32)
    X[2] = np.nan  # a row of NaN would be "at distance 0" to itself under careless code
    X[3, 0] = np.inf
    scores = krum_scores(X, 0)
    assert np.isposinf(scores[[2, 3]]).all() and np.isfinite(np.delete(scores, [2, 3])).all()
    assert krum_select(X, 0) not in (2, 3)


@pytest.mark.parametrize("rule", sorted(RULES))
def test_too_few_finite_rows_is_a_clear_error(rule: str) -> None:
    X = np.ones((7, 5), dtype=np.float32)
    X[:6] = np.nan
    f = 1
    if rule == "mean":
        np.testing.assert_array_equal(RULES[rule](X, f), np.ones(5))
        X[6] = np.nan
    with pytest.raises(AggregationError, match=r"n=7 after dropping \d rows with NaN/Inf"):
        RULES[rule](X, f)


# --- constraints and inputs -------------------------------------------------------------------------


def test_registry_names() -> None:
    assert set(RULES) == {
        "krum",
        "multi-krum",
        "median",
        "trimmed-mean",
        "centered-clip",
        "mean",
        "ss-clip",
    }


@pytest.mark.parametrize(
    ("rule", "f", "need"),
    [
        ("krum", 0, 3),
        ("krum", 1, 5),
        ("multi-krum", 2, 7),
        ("median", 1, 3),
        ("trimmed-mean", 2, 5),
        ("centered-clip", 1, 3),
        ("mean", 3, 1),
    ],
)
def test_min_peers_table(rule: str, f: int, need: int) -> None:
    assert min_peers(rule, f) == need
    check_rule(rule, f, need)
    if need > 1:
        with pytest.raises(AggregationError, match=f"{rule} with f={f} needs at least {need}"):
            check_rule(rule, f, need - 1)


def test_unknown_rule_and_bad_f_are_refused() -> None:
    with pytest.raises(AggregationError, match="unknown aggregation rule 'bulyan'"):
        min_peers("bulyan", 1)
    X = np.ones((5, 3), dtype=np.float32)
    for bad in (-1, 1.5, True, None):
        with pytest.raises(AggregationError, match="f must be"):
            RULES["median"](X, bad)


@pytest.mark.parametrize(
    "bad",
    [
        np.ones(5, np.float32),
        np.ones((0, 5), np.float32),
        np.ones((3, 5), np.int64),
        [[1.0, 2.0]] * 3,
    ],
)
@pytest.mark.parametrize("rule", sorted(RULES))
def test_bad_inputs_raise_aggregation_error(rule: str, bad: object) -> None:
    with pytest.raises(AggregationError):
        RULES[rule](bad, 0)


def test_errors_are_swarmnode_errors() -> None:
    assert issubclass(AggregationError, SwarmnodeError)


def test_long_rows_span_several_column_blocks(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(aggregate, "BLOCK_ELEMENTS", 64)
    X = np.random.default_rng(5).standard_normal((7, 301)).astype(np.float32)
    X[2, 7] = np.nan
    for rule, reference in (("median", ref_median), ("trimmed-mean", ref_trimmed_mean)):
        np.testing.assert_allclose(RULES[rule](X, 2), reference(X, 2), rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(
        RULES["centered-clip"](X, 2), ref_centered_clip(X, 2), rtol=1e-5, atol=1e-6
    )
