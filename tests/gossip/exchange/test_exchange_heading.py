"""Robust mode through the exchanger: an IPM-like model is cut along the heading in my own round
and in the push it sends me; with `backward_limit` 0 it is not (the rule as it was)."""

from __future__ import annotations

import numpy as np
import pytest
from swarmnode.gossip.errors import ExchangeError
from swarmnode.gossip.exchange import InMemoryStore
from swarmnode.gossip.exchange.exchanger import ExchangeConfig
from swarmnode.gossip.robust import heading

from tests.gossip.exchange.test_exchange import make_swarm

pytestmark = pytest.mark.timeout(30)

D = 300


def ipm_swarm(limit: float) -> tuple[list, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(7)
    base = rng.normal(size=D).astype(np.float32)
    m = (0.05 * rng.normal(size=D)).astype(np.float32)
    spread = 2 * np.linalg.norm(m) / np.sqrt(D)
    u = m.astype(np.float64) / np.linalg.norm(m)
    sides = [spread * rng.normal(size=D) for _ in range(3)]
    sides = [s - (s @ u) * u for s in sides]  # the non-iid spread: sideways, none back
    honest = [base, *(base + s.astype(np.float32) for s in sides)]
    liar = base + 4 * m  # back along the heading, inside the drop bound
    stores = [InMemoryStore(v, heading=m) for v in [*honest, liar]]  # m pointing back
    # no outer step: the heading stays m, the one the bounds are measured against
    cfg = ExchangeConfig(
        mode="robust", pull=4, backward_limit=limit, outer_lr=1.0, outer_momentum=0.0
    )
    _, exs = make_swarm([*honest, liar], cfg, stores=stores)
    return exs, base, m


def back_of(x: np.ndarray, base: np.ndarray, m: np.ndarray) -> float:
    b, norm = heading.backward_part(base, x, m)
    return b / norm


@pytest.mark.parametrize("limit", [0.5, 0.0])
async def test_own_round_and_push_from_an_ipm_liar(limit: float) -> None:
    exs, base, m = ipm_swarm(limit)
    assert (await exs[0].round()).applied
    after_round = back_of(exs[0].store.x, base, m)
    if limit:  # the liar's row cut to 0.5 |m| back, at weight 1/5
        assert exs[0].mode_round.back is not None
        assert 0 < after_round <= 0.5 / 5 + 0.02
    else:  # as it was: clipped to tau only, at 1/5
        assert exs[0].mode_round.back is None and after_round > 0.3
    x0 = exs[0].store.x.copy()
    assert (await exs[4].round()).applied  # the liar's own round pushes it to peers 0-3
    pushed = back_of(exs[0].store.x, base, m) - back_of(x0, base, m)
    assert exs[0].guard.refused == 0
    if limit:
        assert 0 < pushed <= 0.5 / 5 + 0.02
    else:
        assert pushed > 0.3


def test_a_negative_limit_is_refused_and_zero_is_the_rule_as_it_was() -> None:
    with pytest.raises(ExchangeError, match="backward_limit"):
        ExchangeConfig(mode="robust", backward_limit=-0.5).validate()
    assert ExchangeConfig(mode="robust", backward_limit=0).validate().backward_limit == 0
