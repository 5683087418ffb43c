"""`lr_mismatch`: what a joiner says when the live members' lr schedules (their records' `lr`,
an insider's writing) differ from its own."""

from __future__ import annotations

import pytest
from swarmnode.node.peer.announce import lr_mismatch
from swarmnode.node.train.lr import LRSchedule

COSINE = LRSchedule("cosine", warmup=100, horizon=3000)
CONSTANT = LRSchedule()


def test_the_print_names_the_decay_and_its_horizon() -> None:
    assert COSINE.print == "cosine:3000"
    assert CONSTANT.print == "constant"


def test_a_constant_joiner_in_a_decaying_swarm_is_told_the_horizon() -> None:
    text = lr_mismatch(CONSTANT, ["cosine:3000", "cosine:3000"])
    assert text is not None and "--lr-decay-steps 3000" in text and "is constant" in text


def test_a_decaying_joiner_in_a_constant_swarm_is_told_to_keep_it_constant() -> None:
    text = lr_mismatch(COSINE, ["constant"])
    assert text is not None and "--lr-schedule constant" in text and "cosine:3000" in text


@pytest.mark.parametrize(
    "theirs",
    [
        ["cosine:3000"],  # the same schedule
        [],  # nobody live
        [None, None],  # a release without the key
        ["cosine:3000", "linear:500"],  # the members disagree: no one schedule to follow
        ["rm -rf:3000"],  # not a schedule
        ["cosine:lots"],  # not a horizon
        [7, {"a": 1}],  # not a string
        ["cosine:" + "9" * 60],  # too long to be one
    ],
)
def test_nothing_is_said_where_there_is_nothing_to_follow(theirs: list[object]) -> None:
    assert lr_mismatch(COSINE, theirs) is None
