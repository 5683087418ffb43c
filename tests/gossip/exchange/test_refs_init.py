"""Pairs on the shared start (peers of one seed and model): no full frame where both started
alike, a clear fallback where they did not, and a start frame that stands alone."""

from __future__ import annotations

import numpy as np
import pytest
from swarmnode.gossip.errors import RefMismatch
from swarmnode.gossip.exchange.refs import PairRefs, init_epoch
from swarmnode.kernels import compress

pytestmark = pytest.mark.timeout(30)

N = 4000


def vec(seed: int, scale: float = 1.0) -> np.ndarray:
    return (np.random.default_rng(seed).standard_normal(N) * scale).astype(np.float32)


X0 = vec(0)


def exchange(a: PairRefs, b: PairRefs, xa: np.ndarray, xb: np.ndarray) -> None:
    """One push-pull from a ("A") to b ("B"), as gossip.exchange.compressed does it; on a 409 the
    initiator forgets, as `CompressedPushPull` does."""
    req = a.encode("B", xa)
    header = {**req.fields, **a.want("B")}
    try:
        b.receive("A", header, compress.decode(req.packed))
    except RefMismatch:
        a.forget("B", req, mismatch=True)
        raise
    ans = b.encode("A", xb, want=header)
    b.commit(ans)
    a.receive("B", ans.fields, compress.decode(ans.packed))
    a.commit(req)


@pytest.mark.parametrize("codec", [("topk", 0.05), ("int8", 0.0)])
def test_pair_on_the_shared_start_sends_no_full_frame(codec: tuple[str, float]) -> None:
    a, b = PairRefs(*codec, N, init=X0), PairRefs(*codec, N, init=X0)
    xa, xb = X0 + vec(1, 0.01), X0 + vec(2, 0.01)
    for _ in range(60):
        exchange(a, b, xa, xb)
    assert a.full_frames == b.full_frames == 0
    assert a.init_frames == b.init_frames == 1
    np.testing.assert_allclose(b.recv["A"].vec, xa, atol=1e-4)  # error feedback got it all
    np.testing.assert_allclose(a.recv["B"].vec, xb, atol=1e-4)


def test_first_frame_on_the_start_is_small_and_more_precise_than_a_full_one() -> None:
    a = PairRefs("int8", 0.0, N, init=X0)
    x = X0 + vec(1, 1e-3)
    out = a.encode("B", x)
    assert out.fields["ref_epoch"] == init_epoch(X0) and out.fields["ref_ver"] == 1
    full = compress.encode(x, "int8")
    assert out.packed.nbytes == full.nbytes
    err_init = np.abs(out.new.vec - x).max()
    assert err_init < np.abs(compress.decode(full) - x).max() / 100


def test_a_different_start_is_refused_and_the_pair_falls_back_to_full_frames() -> None:
    a, b = PairRefs("topk", 0.05, N, init=X0), PairRefs("topk", 0.05, N, init=vec(9))
    with pytest.raises(RefMismatch):
        exchange(a, b, vec(1), vec(2))
    assert "B" in a.init_refused and "B" not in a.sent
    exchange(a, b, vec(1), vec(2))
    assert a.full_frames == 1 and b.full_frames == 1  # b had no start of a's to answer on
    exchange(a, b, vec(1), vec(2))
    assert a.full_frames == 1 and b.full_frames == 1  # then deltas, as any pair
    np.testing.assert_array_equal(a.sent["B"].vec, b.recv["A"].vec)
    np.testing.assert_array_equal(a.recv["B"].vec, b.sent["A"].vec)


def test_a_start_frame_stands_alone_after_a_restart() -> None:
    a, b = PairRefs("topk", 0.05, N, init=X0), PairRefs("topk", 0.05, N, init=X0)
    for i in range(5):
        exchange(a, b, X0 + vec(i, 0.1), X0 + vec(50 + i, 0.1))
    restarted = PairRefs("topk", 0.05, N, init=X0)  # a lost its references, b holds ver 6
    exchange(restarted, b, X0 + vec(7, 0.1), X0 + vec(8, 0.1))
    np.testing.assert_array_equal(restarted.sent["B"].vec, b.recv["A"].vec)
    np.testing.assert_array_equal(restarted.recv["B"].vec, b.sent["A"].vec)
    assert restarted.full_frames == 0 and restarted.init_frames == 1  # first contact: start
    assert b.full_frames == 1  # b paired with A before: topk on the start would lag, full


def test_topk_resyncs_in_full_frames_and_dense_codecs_on_the_start() -> None:
    for codec, full in (("topk", 1), ("int8", 0)):
        a, b = PairRefs(codec, 0.05, N, init=X0), PairRefs(codec, 0.05, N, init=X0)
        exchange(a, b, X0 + vec(1, 0.1), X0 + vec(2, 0.1))
        a.forget("B")  # an exchange failed: what a sent may not have arrived
        exchange(a, b, X0 + vec(3, 0.1), X0 + vec(4, 0.1))
        assert a.full_frames == full and a.init_frames == 2 - full, codec


def test_a_peer_without_a_start_pairs_in_full_frames() -> None:
    a, b = PairRefs("int8", 0.0, N), PairRefs("int8", 0.0, N, init=X0)
    exchange(a, b, vec(1), vec(2))
    assert a.full_frames == 1 and b.full_frames == 1 and b.init_frames == 0
    # the other way round (the helper names the initiator "A"): b starts on x0, a refuses
    with pytest.raises(RefMismatch):
        exchange(b, a, vec(3), vec(4))
    assert "B" in b.init_refused
    exchange(b, a, vec(3), vec(4))
    assert b.full_frames == 2 and b.init_frames == 1


def test_the_start_digest_tells_starts_apart() -> None:
    assert init_epoch(X0) == init_epoch(X0.copy())
    y = X0.copy()
    y[123] = np.nextafter(y[123], np.float32(1e9))
    assert init_epoch(y) != init_epoch(X0)
    assert init_epoch(X0[:-1]) != init_epoch(X0)
