"""Byzantine behaviours: spec parsing, shapes and dtypes, and each attack's defining property."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays
from swarmnode.fault.inject.byzantine import (
    BYZANTINE,
    Alie,
    ByzantineError,
    alie_z,
    flip_labels,
    parse_byzantine,
)
from swarmnode.fault.inject.spec import FaultSpecError
from swarmnode.kernels.errors import ShapeError

D = 1000
ROOT = Path(__file__).resolve().parents[3]
NON_FINITE_KINDS = {"nan", "inf", "garbage"}


@pytest.fixture
def own() -> np.ndarray:
    return np.random.default_rng(0).standard_normal(D).astype(np.float32)


@pytest.fixture
def honest() -> list[np.ndarray]:
    rng = np.random.default_rng(1)
    base = rng.standard_normal(D).astype(np.float32)
    return [base + 0.1 * rng.standard_normal(D).astype(np.float32) for _ in range(7)]


def test_registry_holds_every_kind_the_cli_offers() -> None:
    assert set(BYZANTINE) == {
        "sign-flip",
        "gaussian",
        "noise",
        "alie",
        "ipm",
        "dissensus",
        "mimic",
        "nan",
        "inf",
        "garbage",
        "huge",
        "label-flip",
    }
    colluders = {k for k, b in BYZANTINE.items() if b.needs_honest_views}
    assert colluders == {"alie", "ipm", "dissensus", "mimic"}
    assert {k for k, b in BYZANTINE.items() if b.per_recipient} == {"dissensus"}
    assert {k for k, b in BYZANTINE.items() if b.poisons_labels} == {"label-flip"}


@pytest.mark.parametrize(
    ("spec", "attr", "value"),
    [
        ("gaussian:10", "sigma", 10.0),
        ("ipm:0.5", "epsilon", 0.5),
        ("ipm:epsilon=2", "epsilon", 2.0),
        ("dissensus:4", "epsilon", 4.0),
        ("alie:1.5", "z", 1.5),
        ("alie:f=4, n=20", "n", 20),
        ("mimic:2", "index", 2),
        ("nan:0.25", "fraction", 0.25),
        ("SIGN_FLIP:3", "scale", 3.0),
        ("huge:1e3", "scale", 1000.0),
    ],
)
def test_parse_byzantine_reads_the_parameter(spec: str, attr: str, value: float) -> None:
    behaviour = parse_byzantine(spec)
    assert getattr(behaviour, attr) == value
    assert parse_byzantine(behaviour.spec()) == behaviour


@pytest.mark.parametrize("kind", sorted(BYZANTINE))
def test_bare_kind_is_the_registry_default(kind: str) -> None:
    assert parse_byzantine(kind) is BYZANTINE[kind]
    assert parse_byzantine(BYZANTINE[kind].spec()) == BYZANTINE[kind]


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("bogus", "unknown byzantine kind 'bogus' in 'bogus' (known: sign-flip, gaussian"),
        ("", "unknown byzantine kind ''"),
        ("gaussian:-1", "gaussian:-1: gaussian:sigma=-1.0: must be finite and > 0"),
        ("gaussian:abc", "gaussian:abc: sigma='abc' is not a valid float"),
        ("gaussian:inf", "gaussian:inf: sigma must be finite"),
        ("alie:f=0", "need 1 <= f < n"),
        ("alie:n=4,f=4", "need 1 <= f < n"),
        ("label-flip:3", "label-flip:3: label-flip takes no parameter"),
        ("mimic:1.5", "mimic:1.5: index='1.5' is not a valid int"),
        ("ipm:eps=1", "ipm:eps=1: bad parameter 'eps=1' (ipm takes epsilon)"),
        ("ipm:epsilon=1,epsilon=2", "bad parameter 'epsilon=2'"),
        ("nan:2", "fraction must be in (0, 1]"),
    ],
)
def test_bad_byzantine_specs_raise_one_line(spec: str, message: str) -> None:
    with pytest.raises(FaultSpecError) as info:
        parse_byzantine(spec)
    assert message in str(info.value)
    assert "\n" not in str(info.value)


@pytest.mark.parametrize("kind", sorted(BYZANTINE))
@pytest.mark.parametrize("shape", [(D,), (20, 50)])
def test_every_behaviour_keeps_shape_and_float32(
    kind: str, shape: tuple[int, ...], own: np.ndarray, honest: list[np.ndarray]
) -> None:
    own = own.reshape(shape)
    views = [v.reshape(shape) for v in honest]
    to = views[1] if BYZANTINE[kind].per_recipient else None
    out = BYZANTINE[kind].poison(own, views, np.random.default_rng(2), recipient=to)
    assert isinstance(out, np.ndarray)
    assert out.shape == own.shape
    assert out.dtype == np.float32
    assert out is not own and not np.shares_memory(out, own)
    if kind not in NON_FINITE_KINDS:
        assert np.isfinite(out).all()


def test_inputs_are_left_untouched(own: np.ndarray, honest: list[np.ndarray]) -> None:
    own_copy, honest_copy = own.copy(), [v.copy() for v in honest]
    for behaviour in BYZANTINE.values():
        to = honest[2] if behaviour.per_recipient else None
        behaviour.poison(own, honest, np.random.default_rng(3), recipient=to)
    assert np.array_equal(own, own_copy)
    assert all(np.array_equal(a, b) for a, b in zip(honest, honest_copy, strict=True))


def test_honest_views_may_come_as_a_matrix(own: np.ndarray, honest: list[np.ndarray]) -> None:
    matrix = np.stack(honest)
    for kind in ("alie", "ipm", "mimic"):
        a = BYZANTINE[kind].poison(own, honest, np.random.default_rng(0))
        b = BYZANTINE[kind].poison(own, matrix, np.random.default_rng(0))
        assert np.array_equal(a, b)


def test_same_rng_seed_gives_the_same_poison(own: np.ndarray) -> None:
    for kind in ("gaussian", "noise", "nan", "garbage"):
        a = BYZANTINE[kind].poison(own, None, np.random.default_rng(9))
        b = BYZANTINE[kind].poison(own, None, np.random.default_rng(9))
        assert np.array_equal(a, b, equal_nan=True)


def test_sign_flip_negates_the_vector_or_the_update(own: np.ndarray) -> None:
    np.testing.assert_array_equal(parse_byzantine("sign-flip").poison(own), -own)
    np.testing.assert_allclose(parse_byzantine("sign-flip:2").poison(own), -2 * own)
    reference = own + 0.01
    out = parse_byzantine("sign-flip").poison(own, reference=reference)
    np.testing.assert_allclose(out - reference, -(own - reference), atol=1e-6)


def test_gaussian_adds_noise_of_the_given_sigma_and_noise_ignores_own() -> None:
    own = np.full(200_000, 5.0, dtype=np.float32)
    delta = parse_byzantine("gaussian:3").poison(own, rng=np.random.default_rng(4)) - own
    assert abs(float(delta.mean())) < 0.05
    assert float(delta.std()) == pytest.approx(3.0, rel=0.02)
    pure = parse_byzantine("noise:2").poison(own, rng=np.random.default_rng(4))
    assert abs(float(pure.mean())) < 0.05
    assert float(pure.std()) == pytest.approx(2.0, rel=0.02)


# z from Baruch et al. 2019: s = floor(n/2 + 1) - f, z = Phi^-1((n - s) / n). Values computed by
# hand from the standard normal table (and checked against scipy below). For the example
# n = 50, f = 24 the formula gives s = 2 and Phi^-1(0.96) = 1.75, not 1.0.
ALIE_TABLE = [
    (50, 24, 1.7507),
    (50, 12, 0.5828),
    (20, 4, 0.3853),
    (10, 3, 0.5244),
    (100, 20, 0.4959),
    (5, 1, 0.2533),
    (10, 1, 0.0),  # s = 5, half the workers: no room to hide
    (4, 3, 0.6745),  # colluder majority: s clamped to 1 -> Phi^-1(3/4)
]


@pytest.mark.parametrize(("n", "f", "z"), ALIE_TABLE)
def test_alie_z_matches_the_table(n: int, f: int, z: float) -> None:
    assert alie_z(n, f) == pytest.approx(z, abs=1e-4)


def test_alie_z_matches_scipy_everywhere() -> None:
    norm = pytest.importorskip("scipy.stats").norm
    cases = [(n, f) for n in range(2, 80) for f in range(1, n)]
    ours = np.array([alie_z(n, f) for n, f in cases])
    p = np.array([(n - max(1, math.floor(n / 2 + 1) - f)) / n for n, f in cases])
    np.testing.assert_allclose(ours, norm.ppf(p), rtol=0, atol=1e-9)


@pytest.mark.parametrize(("n", "f"), [(5, 0), (5, 5), (1, 1), (True, 1)])
def test_alie_z_rejects_impossible_counts(n: int, f: int) -> None:
    with pytest.raises(FaultSpecError, match="1 <= f < n"):
        alie_z(n, f)


def test_alie_is_mean_minus_z_std_of_the_honest_views(honest: list[np.ndarray]) -> None:
    matrix = np.stack(honest).astype(np.float64)
    mean, std = matrix.mean(axis=0), matrix.std(axis=0)
    own = np.zeros(D, dtype=np.float32)
    out = parse_byzantine("alie:n=50,f=24").poison(own, honest)
    np.testing.assert_allclose(out, mean - 1.7507 * std, rtol=1e-4, atol=1e-5)
    # Auto mode: n = honest views + f.
    assert Alie(f=3).z_for(len(honest)) == pytest.approx(alie_z(len(honest) + 3, 3))
    fixed = parse_byzantine("alie:0.5").poison(own, honest)
    np.testing.assert_allclose(fixed, mean - 0.5 * std, rtol=1e-4, atol=1e-5)


def test_ipm_points_against_the_honest_mean(own: np.ndarray, honest: list[np.ndarray]) -> None:
    mean = np.stack(honest).astype(np.float64).mean(axis=0)
    out = parse_byzantine("ipm:0.5").poison(own, honest)
    np.testing.assert_allclose(out, -0.5 * mean, rtol=1e-5, atol=1e-6)
    assert float(out @ mean) < 0
    reference = honest[0] - 0.05  # update-space form: the update opposes the honest update
    rel = parse_byzantine("ipm:0.5").poison(own, honest, reference=reference)
    assert float((rel - reference) @ (mean - reference)) < 0


def test_dissensus_pushes_each_recipient_away_from_the_honest_mean(
    own: np.ndarray, honest: list[np.ndarray]
) -> None:
    mean = np.stack(honest).astype(np.float64).mean(axis=0)
    for i in (0, 3):
        x = honest[i]
        out = parse_byzantine("dissensus:2").poison(own, honest, recipient=x)
        np.testing.assert_allclose(out, x - 2.0 * (mean - x), rtol=1e-5, atol=1e-5)
        # what the recipient moves by when it mixes it in points away from the honest mean
        assert float((out - x) @ (mean - x)) < 0
    with pytest.raises(ByzantineError, match="crafts for one recipient"):
        parse_byzantine("dissensus").poison(own, honest)


def test_mimic_copies_one_honest_peer(own: np.ndarray, honest: list[np.ndarray]) -> None:
    np.testing.assert_array_equal(parse_byzantine("mimic").poison(own, honest), honest[0])
    np.testing.assert_array_equal(parse_byzantine("mimic:9").poison(own, honest), honest[2])


def test_nan_and_inf_poison_the_requested_fraction(own: np.ndarray) -> None:
    rng = np.random.default_rng(5)
    half = parse_byzantine("nan:0.5").poison(own, rng=rng)
    assert int(np.isnan(half).sum()) == D // 2
    kept = ~np.isnan(half)
    np.testing.assert_array_equal(half[kept], own[kept])
    assert np.isnan(parse_byzantine("nan").poison(own, rng=rng)).all()
    inf = parse_byzantine("inf").poison(own, rng=rng)
    assert np.isposinf(inf).any() and np.isneginf(inf).any() and np.isinf(inf).all()


def test_garbage_and_huge(own: np.ndarray) -> None:
    garbage = parse_byzantine("garbage").poison(own, rng=np.random.default_rng(6))
    magnitudes = np.abs(garbage[np.isfinite(garbage)])
    assert magnitudes.max() > 1e30 and magnitudes.min() < 1e-30
    np.testing.assert_allclose(parse_byzantine("huge").poison(own), own * 1e6, rtol=1e-6)


def test_label_flip_serves_honest_parameters_and_flips_labels(own: np.ndarray) -> None:
    behaviour = parse_byzantine("label-flip")
    np.testing.assert_array_equal(behaviour.poison(own), own)
    y = np.array([0, 1, 2, 9], dtype=np.int64)
    np.testing.assert_array_equal(behaviour.transform_labels(y, 10), [9, 8, 7, 0])
    assert BYZANTINE["gaussian"].transform_labels(y, 10) is y


@given(
    st.integers(2, 1000).flatmap(
        lambda k: st.tuples(
            st.just(k),
            arrays(np.int32, st.integers(0, 50), elements=st.integers(0, k - 1)),
        )
    )
)
def test_flip_labels_is_an_involution(case: tuple[int, np.ndarray]) -> None:
    n_classes, y = case
    flipped = flip_labels(y, n_classes)
    assert flipped.dtype == y.dtype
    assert ((flipped >= 0) & (flipped < n_classes)).all()
    np.testing.assert_array_equal(flip_labels(flipped, n_classes), y)


@pytest.mark.parametrize(
    ("y", "n_classes", "error"),
    [
        (np.array([0, 10]), 10, ByzantineError),
        (np.array([-1]), 10, ByzantineError),
        (np.array([0, 1]), 1, ByzantineError),
        (np.array([0.0, 1.0]), 10, ShapeError),
        ([0, 1], 10, ShapeError),
    ],
)
def test_flip_labels_rejects_bad_labels(y: object, n_classes: int, error: type) -> None:
    with pytest.raises(error):
        flip_labels(y, n_classes)


def test_misuse_gives_clear_errors(own: np.ndarray, honest: list[np.ndarray]) -> None:
    with pytest.raises(ByzantineError, match="needs at least one honest"):
        BYZANTINE["alie"].poison(own, [])
    with pytest.raises(ByzantineError):
        BYZANTINE["ipm"].poison(own, None)
    with pytest.raises(ShapeError, match="honest view 1 has 999 values"):
        BYZANTINE["mimic"].poison(own, [honest[0], honest[1][:-1]])
    with pytest.raises(ShapeError, match="honest views have 10 values each"):
        BYZANTINE["alie"].poison(own, np.zeros((3, 10), dtype=np.float32))
    with pytest.raises(ShapeError, match="numpy or cupy array"):
        BYZANTINE["huge"].poison([1.0, 2.0])
    with pytest.raises(ShapeError, match="floating-point"):
        BYZANTINE["huge"].poison(np.arange(4))
    with pytest.raises(ShapeError, match="reference"):
        BYZANTINE["sign-flip"].poison(own, reference=own[:10])


@pytest.mark.gpu
def test_behaviours_run_on_cupy_and_match_numpy(own: np.ndarray, honest: list[np.ndarray]) -> None:
    cupy = pytest.importorskip("cupy")
    own_gpu, honest_gpu = cupy.asarray(own), [cupy.asarray(v) for v in honest]
    for kind, behaviour in BYZANTINE.items():
        to, to_gpu = (honest[1], honest_gpu[1]) if behaviour.per_recipient else (None, None)
        out = behaviour.poison(own_gpu, honest_gpu, np.random.default_rng(7), recipient=to_gpu)
        assert isinstance(out, cupy.ndarray), kind
        assert out.shape == own.shape and out.dtype == cupy.float32, kind
        if kind not in {"gaussian", "noise"}:  # those draw on the GPU: other numbers
            expected = behaviour.poison(own, honest, np.random.default_rng(7), recipient=to)
            np.testing.assert_allclose(
                cupy.asnumpy(out), expected, rtol=1e-5, atol=1e-6, equal_nan=True, err_msg=kind
            )
    labels = cupy.arange(10, dtype=cupy.int32)
    np.testing.assert_array_equal(cupy.asnumpy(flip_labels(labels, 10)), np.arange(10)[::-1])


# --- the spec additions: swarm counts, update-space sign-flip ---------------------------------


def test_alie_takes_n_and_f_from_the_swarm_unless_the_spec_gives_them() -> None:
    auto = parse_byzantine("alie").with_swarm(7, 2)
    assert (auto.n, auto.f) == (7, 2)
    assert auto.z_for(5) == pytest.approx(alie_z(7, 2))  # 0.566, not the 5 views' guess
    pinned = parse_byzantine("alie:n=5,f=1").with_swarm(9, 3)
    assert (pinned.n, pinned.f) == (5, 1)
    with pytest.raises(ByzantineError, match="3 colluders among 3 workers"):
        parse_byzantine("alie").with_swarm(3, 3)
    assert parse_byzantine("ipm").with_swarm(7, 2) == parse_byzantine("ipm")


def test_sign_flip_update_mode_needs_and_uses_a_reference(own: np.ndarray) -> None:
    flip = parse_byzantine("sign-flip:scale=2,update=1")
    assert flip.wants_reference and not parse_byzantine("sign-flip").wants_reference
    assert parse_byzantine(flip.spec()) == flip
    reference = own - 0.5
    np.testing.assert_allclose(flip.poison(own, reference=reference), own - 1.5, atol=1e-6)
    with pytest.raises(ByzantineError, match="needs a reference"):
        flip.poison(own)
    with pytest.raises(FaultSpecError, match="update must be 0 or 1"):
        parse_byzantine("sign-flip:update=2")
