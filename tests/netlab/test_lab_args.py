"""The lab's per-peer arguments (pure functions: no namespaces needed)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from scripts.netlab.lab import shard_args, step_time

pytestmark = pytest.mark.timeout(10)


def test_each_peer_gets_its_own_shard() -> None:
    assert [shard_args(["--steps", "10"], i, 4) for i in range(4)] == [
        ["--shard", f"{i}/4"] for i in range(4)
    ]


@pytest.mark.parametrize("given", [["--shard", "0/1"], ["--shard=1/2"]])
def test_a_shard_named_by_the_user_wins(given: list[str]) -> None:
    assert shard_args(["--partition", "dirichlet:0.5", *given], 2, 4) == []


def test_the_release_keeps_each_peers_step_time() -> None:
    # the release's admin request sets both pacing knobs; a peer's --step-time must survive it
    assert step_time(["--steps", "9"]) == 0.0
    assert step_time(["--step-time", "0.15", "--steps", "9"]) == 0.15
    assert step_time(["--step-time=0.2", "--step-time", "0.3"]) == 0.3
