"""Sharding: shards of all indices partition the train set, deterministically, iid or skewed."""

from __future__ import annotations

import numpy as np
import pytest
from swarmnode.node.train.data.shard import Partition, parse_partition, parse_shard, shard_indices
from swarmnode.node.train.errors import ConfigError, DataError

Y = np.repeat(np.arange(10), 50)  # 500 samples, 10 balanced classes


@pytest.mark.parametrize("scheme", ["iid", "dirichlet:0.3", "dirichlet:100"])
@pytest.mark.parametrize("n", [1, 3, 7])
def test_shards_partition_the_train_set(scheme: str, n: int) -> None:
    shards = [shard_indices(Y, n, i, scheme, seed=5) for i in range(n)]
    joined = np.concatenate(shards)
    assert len(joined) == len(Y)  # disjoint ...
    np.testing.assert_array_equal(np.sort(joined), np.arange(len(Y)))  # ... and covering
    assert all(len(s) > 0 for s in shards)


def test_deterministic_in_seed_and_not_in_call_order() -> None:
    a = shard_indices(Y, 4, 2, "dirichlet:0.5", seed=1)
    [shard_indices(Y, 4, i, "dirichlet:0.5", seed=1) for i in range(4)]
    np.testing.assert_array_equal(a, shard_indices(Y, 4, 2, "dirichlet:0.5", seed=1))
    assert not np.array_equal(a, shard_indices(Y, 4, 2, "dirichlet:0.5", seed=2))


def test_iid_shards_are_balanced() -> None:
    sizes = [len(shard_indices(Y, 3, i, "iid", seed=0)) for i in range(3)]
    assert max(sizes) - min(sizes) <= 1


def _label_skew(scheme: str) -> float:
    """Mean over shards of the largest class share (0.1 = uniform over 10 classes, 1 = one class)."""
    shares = []
    for i in range(5):
        counts = np.bincount(Y[shard_indices(Y, 5, i, scheme, seed=0)], minlength=10)
        shares.append(counts.max() / counts.sum())
    return float(np.mean(shares))


def test_dirichlet_alpha_controls_label_skew() -> None:
    assert _label_skew("dirichlet:0.1") > 0.4
    assert _label_skew("dirichlet:1000") < 0.2
    assert _label_skew("iid") < 0.2


def test_too_many_shards_is_a_data_error() -> None:
    with pytest.raises(DataError):
        shard_indices(Y[:3], 4, 0, "iid", seed=0)


@pytest.mark.parametrize(
    ("text", "expected"),
    [("iid", Partition("iid")), ("dirichlet:0.5", Partition("dirichlet", 0.5))],
)
def test_parse_partition(text: str, expected: Partition) -> None:
    assert parse_partition(text) == expected
    assert str(parse_partition(text)) == text


@pytest.mark.parametrize(
    "text", ["", "dirichlet", "dirichlet:0", "dirichlet:-1", "dirichlet:x", "zipf:2"]
)
def test_bad_partition(text: str) -> None:
    with pytest.raises(ConfigError):
        parse_partition(text)


def test_parse_shard() -> None:
    assert parse_shard("2/5") == (2, 5)
    for bad in ["5/5", "-1/3", "1", "a/b", "0/0"]:
        with pytest.raises(ConfigError):
            parse_shard(bad)
