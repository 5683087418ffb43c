"""A topk delta applied sparsely (indices, values into the reference copy) gives exactly the
bits of the dense path (decode to n values, add): both run on the same frames and compare."""

from __future__ import annotations

import random

import numpy as np
import pytest
from swarmnode.gossip.errors import WireError
from swarmnode.gossip.exchange import refs
from swarmnode.gossip.exchange.refs import PairRefs
from swarmnode.gossip.wire import frames as wire
from swarmnode.kernels import compress

pytestmark = pytest.mark.timeout(120)

N = 200_000  # four 65536-value buckets, the last one short
ROUNDS = 30
W = 0.5


def dense_plus(base: np.ndarray, packed: compress.Packed) -> np.ndarray:
    """The sender's new reference as it was computed before the sparse path."""
    step = compress.decode(packed)
    step += base
    return step


def _decode(frame: memoryview, sparse: bool) -> tuple[dict, object]:
    header, vec = wire.decode_params(frame, expected_size=N, sparse=sparse)
    wire.validate_params(vec, N)
    assert isinstance(vec, compress.Sparse) == (sparse and header["codec"] == "tk16")
    return header, vec


def run_pair(sparse: bool) -> list[np.ndarray]:
    """ROUNDS push-pulls A -> B at topk 1% with local training noise in between; every model
    and reference copy after every round."""
    random.seed(0)  # the epochs of full frames
    rng = np.random.default_rng(1)
    x0 = rng.standard_normal(N).astype(np.float32)
    x = {p: x0 + 0.1 * rng.standard_normal(N).astype(np.float32) for p in "AB"}
    r = {p: PairRefs("topk", 0.01, N, seed=7, init=x0) for p in "AB"}
    seen = []
    for i in range(ROUNDS):
        if i == ROUNDS // 2:
            r["A"].forget("B")  # a lost answer: the pair resumes with a full (int8) frame
        out = r["A"].encode("B", x["A"])
        extra = {**out.fields, **r["A"].want("B"), "mix": W}
        header, theirs = _decode(
            wire.encode_packed(out.packed, sender="A", step=0, extra=extra), sparse
        )
        r["B"].receive("A", header, theirs)
        back = r["B"].encode("A", x["B"], header)
        r["B"].commit(back)
        x["B"] += r["B"].gossip_step("A", W)
        frame = wire.encode_packed(back.packed, sender="B", step=0, extra=back.fields)
        header, theirs = _decode(frame, sparse)
        r["A"].receive("B", header, theirs)
        r["A"].commit(out)
        x["A"] += r["A"].gossip_step("B", W)
        for p in "AB":
            x[p] += 0.01 * rng.standard_normal(N).astype(np.float32)
        seen += [x["A"].copy(), x["B"].copy()]
        pairs = (("A", "B"), ("B", "A"))
        seen += [t[q].vec.copy() for p, q in pairs for t in (r[p].sent, r[p].recv)]
    assert r["A"].delta_frames >= ROUNDS - 1 and r["A"].full_frames == 1
    return seen


def test_sparse_and_dense_paths_give_the_same_bits(monkeypatch: pytest.MonkeyPatch) -> None:
    sparse = run_pair(sparse=True)
    monkeypatch.setattr(refs, "_plus", dense_plus)
    dense = run_pair(sparse=False)
    assert len(sparse) == len(dense)
    for i, (a, b) in enumerate(zip(sparse, dense, strict=True)):
        assert np.array_equal(a.view(np.uint32), b.view(np.uint32)), f"vector {i} differs"
    assert not np.array_equal(sparse[0], sparse[-2])  # the models moved: not a vacuous check


def test_sparse_delta_that_overflows_drops_the_reference() -> None:
    x0 = np.full(N, 3.0e38, dtype=np.float32)
    r = PairRefs("topk", 0.01, N, init=x0)
    header = {"ref": "delta", "ref_epoch": r.init_epoch, "ref_ver": 1}
    big = compress.Sparse(N, np.array([5, 70_000]), np.array([1e38, 6e4], dtype=np.float32))
    with pytest.raises(WireError, match="overflowed"):
        r.receive("A", header, big)
    assert "A" not in r.recv


def test_a_gossip_step_that_would_overflow_drops_the_pair() -> None:
    r = PairRefs("topk", 0.01, 4)
    r.sent["A"] = refs.Ref(1, 2, np.full(4, -3.0e38, dtype=np.float32))
    r.recv["A"] = refs.Ref(2, 2, np.full(4, 3.0e38, dtype=np.float32))
    with pytest.raises(WireError, match="too far apart"):
        r.gossip_step("A", W)
    assert "A" not in r.sent and "A" not in r.recv
