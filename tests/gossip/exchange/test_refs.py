"""Per-pair references: error feedback delivers what compression held back, both sides stay in
step through lost answers, restarts and evictions, and anything doubtful ends in a full frame."""

from __future__ import annotations

import numpy as np
import pytest
from swarmnode.gossip.errors import RefMismatch, WireError
from swarmnode.gossip.exchange.refs import PairRefs

pytestmark = pytest.mark.timeout(30)

N = 4000


def vec(seed: int) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(N).astype(np.float32)


def exchange(a: PairRefs, b: PairRefs, xa: np.ndarray, xb: np.ndarray, lose_answer=False):
    """One push-pull from a ("A") to b ("B"), as the exchange does it."""
    req = a.encode("B", xa)
    from swarmnode.kernels import compress

    header = {**req.fields, **a.want("B")}
    b.receive("A", header, compress.decode(req.packed))
    ans = b.encode("A", xb, want=header)
    b.commit(ans)
    if lose_answer:
        a.forget("B")
        return None
    a.receive("B", ans.fields, compress.decode(ans.packed))
    a.commit(req)
    return None


SEGS = ((40, 100),)  # N values as one matrix, for lowrank


@pytest.mark.parametrize(
    "codec", [("topk", 0.05), ("topk2", 0.1), ("lowrank", 8.0), ("int8", 0.0), ("fp16", 0.0)]
)
def test_error_feedback_delivers_everything_eventually(codec: tuple[str, float]) -> None:
    a, b = PairRefs(*codec, N, segs=SEGS), PairRefs(*codec, N, segs=SEGS)
    xa, xb = vec(1), vec(2)
    for _ in range(60):
        exchange(a, b, xa, xb)
    # static models: each side's copy of the other converges to the real thing
    np.testing.assert_allclose(b.recv["A"].vec, xa, atol=2e-3)
    np.testing.assert_allclose(a.recv["B"].vec, xb, atol=2e-3)
    assert a.full_frames == 1 and b.full_frames == 1


@pytest.mark.parametrize("codec", [("topk", 0.1), ("topk2", 0.03), ("lowrank", 4.0)])
def test_both_sides_take_opposite_steps_and_keep_sharing_the_copies(
    codec: tuple[str, float],
) -> None:
    a, b = PairRefs(*codec, N, segs=SEGS), PairRefs(*codec, N, segs=SEGS)
    for i in range(5):
        exchange(a, b, vec(i), vec(100 + i))
        da, db = a.gossip_step("B", 0.5), b.gossip_step("A", 0.5)
        np.testing.assert_array_equal(da, -db)  # the pair's sum is preserved
        np.testing.assert_array_equal(a.sent["B"].vec, b.recv["A"].vec)
        np.testing.assert_array_equal(a.recv["B"].vec, b.sent["A"].vec)


def test_lost_answer_resynchronises_with_full_frames() -> None:
    a, b = PairRefs("topk", 0.1, N), PairRefs("topk", 0.1, N)
    exchange(a, b, vec(1), vec(2))
    exchange(a, b, vec(3), vec(4), lose_answer=True)
    # a forgot what it sent; b's answer was committed but never arrived: a's want is stale
    fa, fb = a.full_frames, b.full_frames
    exchange(a, b, vec(5), vec(6))
    assert a.full_frames == fa + 1 and b.full_frames == fb + 1
    exchange(a, b, vec(7), vec(8))
    assert a.full_frames == fa + 1 and b.full_frames == fb + 1  # back to deltas


def test_delta_on_unknown_reference_is_refused_with_409() -> None:
    a, b = PairRefs("int8", 0.0, N), PairRefs("int8", 0.0, N)
    exchange(a, b, vec(1), vec(2))
    restarted = PairRefs("int8", 0.0, N)  # b lost its state
    req = a.encode("B", vec(3))
    from swarmnode.kernels import compress

    with pytest.raises(RefMismatch) as err:
        restarted.receive("A", req.fields, compress.decode(req.packed))
    assert err.value.status == 409 and "out of sync" in str(err.value)


@pytest.mark.parametrize(
    "header",
    [{}, {"ref": "zip", "ref_epoch": 1, "ref_ver": 0}, {"ref": "full", "ref_epoch": -1,
     "ref_ver": 0}, {"ref": "delta", "ref_epoch": 1, "ref_ver": "x"}],
)  # fmt: skip
def test_bad_reference_fields_are_wire_errors(header: dict) -> None:
    with pytest.raises(WireError):
        PairRefs("int8", 0.0, N).receive("A", header, vec(1))


def test_overflowing_reference_is_dropped() -> None:
    b = PairRefs("int8", 0.0, N)
    big = np.full(N, 3e38, dtype=np.float32)
    b.receive("A", {"ref": "full", "ref_epoch": 5, "ref_ver": 0}, big.copy())
    with pytest.raises(WireError, match="overflowed"):
        b.receive("A", {"ref": "delta", "ref_epoch": 5, "ref_ver": 1}, big)
    assert "A" not in b.recv


def test_partners_beyond_the_cap_are_evicted_oldest_first() -> None:
    a = PairRefs("int8", 0.0, N, max_partners=2)
    for p in ("B", "C", "D"):
        a.commit(a.encode(p, vec(1)))
    assert list(a.sent) == ["C", "D"]
