"""lowrank:R (kernels/lowrank.py): segments from shapes, a rank-R matrix comes back exactly
(to fp16), whole segments pass as fp16, the warm start converges, bad ranks and sizes refused,
and the cupy path agrees with numpy where a GPU is."""

from __future__ import annotations

import numpy as np
import pytest
from swarmnode.kernels import compress, lowrank
from swarmnode.kernels.errors import ShapeError

pytestmark = pytest.mark.timeout(30)


def low_rank(rows: int, cols: int, r: int, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return (rng.standard_normal((rows, r)) @ rng.standard_normal((r, cols))).astype(np.float32)


def test_segments_from_parameter_shapes() -> None:
    segs = lowrank.segments([(64, 32), (32,), (8, 4, 5), (3,)])
    assert segs == ((64, 32), (1, 32), (8, 20), (1, 3))
    with pytest.raises(ShapeError, match="no values"):
        lowrank.segments([(0, 3)])


def test_plan_factors_only_what_gains_and_merges_whole_neighbours() -> None:
    segs = ((64, 32), (1, 32), (1, 8), (40, 3), (100, 100))
    assert lowrank.plan(segs, 4) == [(64, 32, 4), (1, 160, 0), (100, 100, 4)]
    assert lowrank.payload_values(lowrank.plan(segs, 4)) == 4 * 96 + 160 + 4 * 200


def test_a_rank_r_matrix_comes_back_to_fp16_precision() -> None:
    m = low_rank(200, 120, 3)
    p = compress.encode(m.ravel(), "lowrank", 3, segs=((200, 120),))
    assert p.nbytes == 2 * 3 * (200 + 120)
    out = compress.decode(p).reshape(200, 120)
    np.testing.assert_allclose(out, m, atol=2e-3 * float(np.abs(m).max()))


def test_whole_segments_travel_as_fp16_and_values_saturate() -> None:
    x = np.array([1.0, -2.5, 1e6, -1e6, 3.0], dtype=np.float32)
    out = compress.decode(compress.encode(x, "lowrank", 2, segs=((1, 5),)))
    np.testing.assert_array_equal(out, [1.0, -2.5, 65504.0, -65504.0, 3.0])


def test_the_warm_start_converges_to_the_best_rank_r_approximation() -> None:
    rng = np.random.default_rng(1)
    u, _ = np.linalg.qr(rng.standard_normal((300, 300)))
    v, _ = np.linalg.qr(rng.standard_normal((200, 200)))
    s = np.geomspace(10.0, 0.01, 200)
    m = (u[:, :200] * s) @ v.T
    m = m.astype(np.float32)
    best = np.linalg.norm(s[4:])  # Eckart-Young: the error of the best rank-4 approximation
    warm: dict = {}
    errs = []
    for _ in range(6):  # the same matrix: each call is one more power iteration
        p = compress.encode(m.ravel(), "lowrank", 4, segs=((300, 200),), warm=warm)
        errs.append(float(np.linalg.norm(compress.decode(p).reshape(300, 200) - m)))
    assert errs[-1] < errs[0]
    assert errs[-1] < 1.05 * best


def test_no_warm_state_gives_the_same_frame_for_the_same_input() -> None:
    x = np.random.default_rng(2).standard_normal(64 * 50).astype(np.float32)
    a = compress.encode(x, "lowrank", 4, segs=((64, 50),))
    b = compress.encode(x, "lowrank", 4, segs=((64, 50),))
    np.testing.assert_array_equal(a.parts["values"], b.parts["values"])


@pytest.mark.parametrize("spec", ["lowrank:0", "lowrank:65", "lowrank:x", "lowrank:2.5", "lowrank"])
def test_bad_ranks_are_refused(spec: str) -> None:
    with pytest.raises(ShapeError, match="lowrank"):
        compress.parse_codec(spec)


def test_segments_must_hold_the_vector() -> None:
    with pytest.raises(ShapeError, match="segments hold"):
        compress.encode(np.zeros(10, np.float32), "lowrank", 2, segs=((3, 3),))


@pytest.mark.gpu
def test_cupy_agrees_with_numpy() -> None:
    import cupy as cp  # conftest skips `gpu` tests where cupy or a device is missing

    m = low_rank(256, 128, 4, seed=3).ravel()
    segs = ((256, 128),)
    host = compress.decode(compress.encode(m, "lowrank", 4, segs=segs))
    dev = compress.decode(compress.encode(cp.asarray(m), "lowrank", 4, segs=segs))
    np.testing.assert_allclose(cp.asnumpy(dev), host, atol=2e-3 * float(np.abs(m).max()))
