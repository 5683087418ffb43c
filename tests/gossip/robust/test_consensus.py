"""The average round's bounds on answers and the consensus cut (gossip/robust/consensus.py,
issue 22): a dissensus model, x_i - eps (mean - x_i), loses what points away from the swarm."""

from __future__ import annotations

import numpy as np
import pytest
from swarmnode.gossip.robust import chunked
from swarmnode.gossip.robust.consensus import bound_answers, cut_away, mean_into

pytestmark = pytest.mark.timeout(30)

D = 64


def _rng() -> np.random.Generator:
    return np.random.default_rng(7)


def test_a_dissensus_model_is_cut_to_the_limit_and_a_sideways_one_kept() -> None:
    rng = _rng()
    consensus = np.zeros(D, np.float32)
    own = (0.1 * rng.standard_normal(D)).astype(np.float32)
    liar = own - 4.0 * (consensus - own)  # dissensus, eps = 4: straight away from the swarm
    limit = 0.05
    cut = cut_away(own, liar, consensus, limit)
    away = (own - consensus) / np.linalg.norm(own - consensus)
    assert float((cut - own) @ away) == pytest.approx(limit, rel=1e-4)
    side = rng.standard_normal(D).astype(np.float32)
    side -= (side @ away) * away  # orthogonal to the away direction: an honest spread
    honest = own + 0.3 * side
    np.testing.assert_allclose(cut_away(own, honest, consensus, limit), honest, atol=1e-6)
    toward = own + 0.5 * (consensus - own)  # toward the swarm: never cut
    np.testing.assert_array_equal(cut_away(own, toward, consensus, limit), toward)
    assert cut_away(own, liar, None, limit) is liar  # no consensus yet: nothing to cut


def test_answers_are_clipped_at_the_second_farthest_and_a_far_one_has_no_say() -> None:
    sent = np.zeros(D, np.float32)
    unit = np.eye(D, dtype=np.float32)
    answers = [1.0 * unit[0], 2.0 * unit[1], 3.0 * unit[2]]
    out = bound_answers(sent, answers, None, tau=None, away_limit=0.0)
    assert [round(float(np.linalg.norm(a)), 5) for a in out] == [1.0, 2.0, 2.0]
    far = [1.0 * unit[0], 2.0 * unit[1], 50.0 * unit[2]]  # beyond 4 radii: counts as `sent`
    out = bound_answers(sent, far, None, tau=None, away_limit=0.0)
    np.testing.assert_array_equal(out[2], sent)
    one = bound_answers(sent, [5.0 * unit[0]], None, tau=2.0, away_limit=0.0)  # the push radius
    assert float(np.linalg.norm(one[0])) == pytest.approx(2.0)
    nan = bound_answers(sent, [unit[0], unit[1], np.full(D, np.nan, np.float32)], None, None, 0.0)
    np.testing.assert_array_equal(nan[2], sent)


def test_the_cut_matches_the_formula_and_spans_chunks() -> None:
    """other - (p - limit) (own - c) / |own - c| where p, the component of other - own along
    own - c, exceeds the limit; over more values than one chunk."""
    rng = np.random.default_rng(3)
    n = chunked.CHUNK * 2 + 17
    own = rng.standard_normal(n).astype(np.float32)
    c = own - rng.standard_normal(n).astype(np.float32)
    other = own + 3.0 * (own - c) + rng.standard_normal(n).astype(np.float32)
    h = (own - c).astype(np.float64)
    size = np.linalg.norm(h)
    p = float(np.dot(other.astype(np.float64) - own, h)) / size
    limit = 0.25 * p
    want = other - (p - limit) * h / size
    got = cut_away(own, other, c, limit)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
    assert cut_away(own, other, c, 2 * p) is other  # within the limit: untouched


def test_bounded_answers_match_cut_then_clip_and_honest_ones_are_not_copied() -> None:
    """The one-pass bound equals `cut_away` followed by the clip at the (k-1)-th distance, over
    more values than one chunk; an answer left alone is returned as it came (no copy)."""
    rng = np.random.default_rng(5)
    n = chunked.CHUNK + 1001
    sent = rng.standard_normal(n).astype(np.float32)
    c = sent - 0.1 * rng.standard_normal(n).astype(np.float32)
    honest = [sent + 0.05 * rng.standard_normal(n).astype(np.float32) for _ in range(2)]
    side = 0.2 * rng.standard_normal(n).astype(np.float32)
    liar = sent + 3.0 * (sent - c) + side  # away from the consensus, and far sideways
    limit = 0.2
    want = [cut_away(sent, a, c, limit) for a in [*honest, liar]]
    dists = sorted(float(np.linalg.norm((w - sent).astype(np.float64))) for w in want)
    radius = dists[1]
    got = bound_answers(sent, [*honest, liar.copy()], c, tau=None, away_limit=limit)
    assert dists[2] > radius  # the liar is the farthest after its cut: it is clipped
    assert got[0] is honest[0] and got[1] is honest[1]
    w = want[2]
    dw = float(np.linalg.norm((w - sent).astype(np.float64)))
    expected = sent + (w - sent) * (radius / dw) if dw > radius else w
    np.testing.assert_allclose(got[2], expected, rtol=1e-4, atol=1e-4)


def test_the_mean_is_written_into_the_buffer_given() -> None:
    rows = [np.full(10, float(i), np.float32) for i in range(3)]
    buf = np.empty(10, np.float32)
    assert mean_into(rows, buf) is buf and np.allclose(buf, 1.0)
    assert mean_into(rows[:1], buf) is buf and np.allclose(buf, 0.0)
    assert mean_into(rows, np.empty(3, np.float32)).shape == (10,)  # a misfit is not reused
