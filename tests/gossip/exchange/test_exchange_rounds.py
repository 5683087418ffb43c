"""The exchange's modes are round objects (`Round`), whole: the exchanger holds the one its
`mode` names and asks it for both halves of the mode (my own round, a push to me)."""

from __future__ import annotations

import inspect
from pathlib import Path

import numpy as np
import pytest
from swarmnode.gossip.exchange import InMemoryStore, Round
from swarmnode.gossip.exchange import exchanger as exchanger_module
from swarmnode.gossip.exchange.average_round import AverageRound
from swarmnode.gossip.exchange.config import MODES
from swarmnode.gossip.exchange.exchanger import ROUNDS, ExchangeConfig, Exchanger
from swarmnode.gossip.exchange.robust_round import RobustRound
from swarmnode.gossip.link.inmemory import InMemoryNetwork

from tests.gossip.exchange.exchange_fakes import FixedPeers

pytestmark = pytest.mark.timeout(30)


def _exchanger(mode: str) -> Exchanger:
    return Exchanger(
        ExchangeConfig(mode=mode),
        self_id="me",
        transport=InMemoryNetwork().transport("me:1"),
        store=InMemoryStore(np.ones(8, np.float32)),
        peers=FixedPeers(),
    )


def test_every_mode_has_a_round_and_nothing_else_does() -> None:
    assert set(ROUNDS) == set(MODES)
    assert ROUNDS == {"average": AverageRound, "robust": RobustRound}


@pytest.mark.parametrize("mode", MODES)
def test_the_exchanger_holds_the_round_of_its_mode_and_it_is_a_round(mode: str) -> None:
    held = _exchanger(mode).mode_round
    assert type(held) is ROUNDS[mode]
    assert isinstance(held, Round)  # runtime_checkable: both methods present


@pytest.mark.parametrize("impl", [AverageRound, RobustRound])
@pytest.mark.parametrize("method", ["run", "take_push"])
def test_each_round_implements_the_protocol_with_its_signature(impl: type, method: str) -> None:
    """`isinstance` against a Protocol checks only that the names exist: the signatures must
    also be the protocol's (same parameters, async), or the exchanger's calls would break."""
    ours, declared = getattr(impl, method), getattr(Round, method)
    assert inspect.iscoroutinefunction(ours)
    assert list(inspect.signature(ours).parameters) == list(inspect.signature(declared).parameters)


def test_no_mode_branch_is_left_in_the_exchanger() -> None:
    """The exchanger picks its round once, by `ROUNDS[cfg.mode]`, and never asks again."""
    source = Path(exchanger_module.__file__).read_text()
    assert 'mode == "' not in source and 'mode != "' not in source
    assert source.count("cfg.mode]") == 1
