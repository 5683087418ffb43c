"""The assertion checks, over synthetic samples."""

from __future__ import annotations

import math

import numpy as np
import pytest
from swarmnode.fault.chaos.assertions import RunRecord, evaluate
from swarmnode.fault.chaos.probe import max_pairwise_distance

from tests.fault.chaos.scenario_text import BASE, parse

# --- assertions over synthetic samples ---------------------------------------------------------


def _samples(points, **extra):
    """[(t, acc)] -> ok samples; acc None -> a missing sample."""
    out = []
    for t, acc in points:
        if acc is None:
            out.append({"t": t, "ok": False, "why": "frozen"})
        else:
            out.append({"t": t, "ok": True, "acc": acc, **extra})
    return out


def _record(samples, timeline=(), distances=(), final=None, end_t=10.0, peer_ids=None):
    return RunRecord(
        samples=samples,
        distances=list(distances),
        timeline=list(timeline),
        peer_ids=peer_ids or {n: [f"id-{n}"] for n in samples},
        final_state=final or dict.fromkeys(samples, "running"),
        end_t=end_t,
    )


def _check(extra, record, base=BASE):
    return evaluate(parse(extra, base=base), record)


def test_final_accuracy_ignores_byzantine_and_reports_no_data():
    rec = _record(
        {
            "a": _samples([(9, 0.9), (10, 0.92)]),
            "b": _samples([(10, 0.1)]),
            "c": _samples([(10, 0.88)]),
        }
    )
    (r,) = _check("[[assert]]\nkind = 'final_accuracy'\nmin = 0.85\n", rec)
    assert r.status == "pass" and r.measured == pytest.approx(0.88)
    assert set(r.per_peer) == {"a", "c"}  # b is byzantine
    (r,) = _check("[[assert]]\nkind = 'final_accuracy'\nmin = 0.9\n", rec)
    assert r.status == "fail" and not r.ok
    rec.samples["c"] = _samples([(10, None)])
    (r,) = _check("[[assert]]\nkind = 'final_accuracy'\nmin = 0.5\n", rec)
    assert r.status == "no data" and not r.ok and "c" in r.detail


def test_must_fail_verdicts():
    rec = _record({"a": _samples([(10, 0.5)]), "c": _samples([(10, 0.5)])})
    (r,) = _check("[[assert]]\nkind = 'final_accuracy'\nmin = 0.85\nmust_fail = true\n", rec)
    assert r.status == "failed as expected" and r.ok
    (r,) = _check("[[assert]]\nkind = 'final_accuracy'\nmin = 0.4\nmust_fail = true\n", rec)
    assert r.status == "passed unexpectedly" and not r.ok


KILL_C = "[[event]]\nat = 5\naction = 'kill'\npeer = 'c'\nid = 'k'\n"


def test_accuracy_drop_is_the_lowest_point_after_the_fault_not_the_end():
    rec = _record(
        {
            # a dips by 6 points mid-outage and recovers by the end: that is a drop
            "a": _samples([(3, 0.90), (4, 0.90), (6, 0.89), (7, 0.84), (9, 0.90), (10, 0.91)]),
            "b": _samples([(3, 0.90), (4, 0.90), (6, 0.89), (7, 0.89), (9, 0.90), (10, 0.91)]),
            "c": _samples([(3, 0.9), (4, 0.9), (5, None)]),
        },
        timeline=[{"t": 5.0, "index": 0, "action": "kill", "peer": "c"}],
        final={"a": "running", "b": "running", "c": "down"},
    )
    (r,) = _check(KILL_C + "[[assert]]\nkind = 'accuracy_drop'\nwindow = 2\n", rec)
    assert set(r.per_peer) == {"a"}  # the default survivors: honest peers no event touches
    assert r.measured == pytest.approx(0.06) and r.status == "fail"
    assert r.facts["levels"]["a"] == {"before": 0.90, "lowest": 0.84, "lowest_t": 7}
    # b alone held within 1 point
    (r,) = _check(KILL_C + "[[assert]]\nkind = 'accuracy_drop'\npeers = ['b']\n", rec)
    assert r.measured == pytest.approx(0.01) and r.status == "pass"


def test_accuracy_drop_until_an_event_and_a_silent_survivor():
    extra = KILL_C + "[[event]]\nat = 8\naction = 'restart'\npeer = 'c'\nid = 'back'\n"
    timeline = [
        {"t": 5.0, "index": 0, "action": "kill", "peer": "c"},
        {"t": 8.0, "index": 1, "action": "restart", "peer": "c"},
    ]
    a = _samples([(4, 0.90), (6, 0.90), (7, 0.895), (9, 0.80), (10, 0.90)])
    rec = _record({"a": a, "c": []}, timeline=timeline)
    assertion = "[[assert]]\nkind = 'accuracy_drop'\nuntil = 'back'\n"
    (r,) = _check(extra + assertion, rec)
    assert r.measured == pytest.approx(0.005) and r.facts["until_t"] == 8.0  # 9 s: outside
    rec.samples["a"] = _samples([(4, 0.9), (6, None), (7, None)])  # answered nothing after
    (r,) = _check(extra + assertion, rec)
    assert r.status == "no data" and not r.ok and "a" in r.detail


def _steps(points):
    """[(t, step)] -> ok samples; step None -> a missing sample."""
    return [{"t": t, "ok": step is not None, "step": step, "why": "timeout"} for t, step in points]


def test_keeps_training_measures_step_stalls_during_the_outage():
    extra = (
        KILL_C
        + "[[event]]\nat = 9\naction = 'restart'\npeer = 'c'\n"
        + "[[assert]]\nkind = 'keeps_training'\n"
    )
    timeline = [
        {"t": 5.0, "index": 0, "action": "kill", "peer": "c"},
        {"t": 9.0, "index": 1, "action": "restart", "peer": "c"},
    ]
    moving = _steps([(t, 100 * t) for t in range(11)])
    stuck_then_moving = _steps([(t, 500 if 5 <= t <= 8 else 100 * t) for t in range(11)])
    rec = _record({"a": moving, "c": []}, timeline=timeline)
    (r,) = _check(extra, rec)
    assert r.threshold == pytest.approx(3.0)  # 2 x sample_every + 1 s
    assert r.facts["from_t"] == 5.0 and r.facts["until_t"] == 9.0  # the outage: kill to restart
    assert r.per_peer == {"a": 0.0} and r.facts["steps_advanced"] == {"a": 400}
    assert r.status == "pass"
    rec.samples["a"] = stuck_then_moving  # stood still from 5 to 8 s: 3 s, at the bar
    (r,) = _check(extra, rec)
    assert r.per_peer == {"a": 3.0} and r.status == "pass"
    (r,) = _check(extra.replace("'keeps_training'", "'keeps_training'\nmax_stall = 2"), rec)
    assert r.status == "fail"
    rec.samples["a"] = _steps([(t, 100) for t in range(11)])  # never moved at all
    (r,) = _check(extra, rec)
    assert r.per_peer == {"a": math.inf} and r.status == "fail"
    rec.samples["a"] = _steps([(4, 400), (5, None), (6, None), (7, None), (8, None), (9, 900)])
    (r,) = _check(extra, rec)  # one answer in the whole outage: not shown to train
    assert r.status == "no data" and "no step sample from a" in r.detail


def test_catch_up_against_the_median_of_the_others():
    extra = KILL_C + "[[event]]\nat = 6\naction = 'restart'\npeer = 'c'\n"
    timeline = [
        {"t": 5.0, "index": 0, "action": "kill", "peer": "c", "ok": True},
        {"t": 6.0, "index": 1, "action": "restart", "peer": "c", "ok": True},
    ]
    rec = _record({"a": _samples([(10, 0.9)]), "c": _samples([(10, 0.8)])}, timeline=timeline)
    (r,) = _check(extra + "[[assert]]\nkind = 'catch_up'\nwithin = 0.05\n", rec)
    assert r.per_peer == {"c": pytest.approx(0.1)} and r.status == "fail"
    rec.samples["c"] = _samples([(4, 0.5), (9, 0.88), (10, 0.9)])
    (r,) = _check(extra + "[[assert]]\nkind = 'catch_up'\nwithin = 0.05\n", rec)
    assert r.per_peer == {"c": pytest.approx(0.01)} and r.status == "pass"


@pytest.mark.parametrize(
    "c_samples, final, reason",
    [
        # never came back: down at the end, its pre-kill accuracy must not count
        (_samples([(3, 0.9), (4, 0.9)]), "down", "c is down at the end, not running"),
        # restarted, but nothing since: only the old process's samples
        (
            _samples([(3, 0.9), (4, 0.9), (7, None), (8, None), (9, None), (10, None)]),
            "running",
            "c reported no accuracy in the final window since it came back at t=6.0 s",
        ),
        # answered after the restart, but went silent well before the end
        (
            _samples([(4, 0.9), (6.5, 0.9), (7, None), (8, None), (9, None), (10, None)]),
            "running",
            "c reported no accuracy in the final window",
        ),
    ],
    ids=["never-back", "nothing-since-restart", "silent-at-the-end"],
)
def test_catch_up_fails_a_peer_that_did_not_come_back(c_samples, final, reason):
    extra = KILL_C + "[[event]]\nat = 6\naction = 'restart'\npeer = 'c'\n"
    timeline = [
        {"t": 5.0, "index": 0, "action": "kill", "peer": "c", "ok": True},
        {"t": 6.0, "index": 1, "action": "restart", "peer": "c", "ok": final == "running"},
    ]
    a = _samples([(4, 0.9), (9, 0.9), (10, 0.9)])
    rec = _record({"a": a, "c": c_samples}, timeline=timeline, final={"a": "running", "c": final})
    (r,) = _check(extra + "[[assert]]\nkind = 'catch_up'\nwithin = 0.05\n", rec)
    assert r.per_peer == {"c": None} and r.status == "no data" and not r.ok
    assert reason in r.detail


def test_membership_latency_per_observer():
    dead = {"id-c": "dead"}
    alive = {"id-c": "alive"}
    rec = _record(
        {
            "a": [{"t": t, "ok": True, "members": alive if t < 7 else dead} for t in range(11)],
            "b": [{"t": t, "ok": True, "members": alive} for t in range(11)],  # never notices
            "c": _samples([(4, 0.9)]),
            # joined after the kill: not asked to have seen it
        },
        timeline=[{"t": 5.0, "index": 0, "action": "kill", "peer": "c"}],
    )
    rec.samples["late"] = [{"t": 8, "ok": True, "members": {}}]
    (r,) = _check(KILL_C + "[[assert]]\nkind = 'membership'\nwithin = 3\n", rec)
    assert r.per_peer["a sees c @5s"] == pytest.approx(2.0)
    assert r.per_peer["b sees c @5s"] == math.inf
    assert not any(k.startswith("late") for k in r.per_peer)
    assert r.status == "fail"


def test_reconverge_measures_time_back_under_the_pre_partition_level():
    base = BASE.replace("duration = 30", "duration = 30\nparams_every = 1")
    extra = (
        "[[event]]\nat = 5\naction = 'partition'\ngroups = [['a'], ['c']]\n"
        "[[event]]\nat = 10\naction = 'heal'\nid = 'h'\n"
        "[[assert]]\nkind = 'reconverge'\nwithin = 5\nwindow = 3\n"
    )
    dist = [(2, 1.0), (3, 1.2), (4, 1.1), (7, 9.0), (11, 5.0), (12, 3.0), (13, 1.15), (14, 1.0)]
    rec = _record(
        {"a": [], "c": []},
        timeline=[
            {"t": 5.0, "index": 0, "action": "partition"},
            {"t": 10.0, "index": 1, "action": "heal"},
        ],
        distances=[{"t": t, "max": d, "n": 2} for t, d in dist],
        end_t=14.0,
    )
    (r,) = evaluate(parse(extra, base=base), rec)
    assert r.per_peer["pre_partition_level"] == pytest.approx(1.2)
    assert r.measured == pytest.approx(3.0) and r.status == "pass"
    assert r.facts["split_peak"] == pytest.approx(9.0) and r.facts["grew"] is True
    assert r.facts["growth"] == pytest.approx(7.5)

    # a split the models never felt: the distance stayed near its level, nothing re-converged
    flat = [(2, 1.0), (3, 1.2), (4, 1.1), (7, 1.3), (9, 1.4), (11, 1.1), (12, 1.0)]
    rec.distances[:] = [{"t": t, "max": d, "n": 2} for t, d in flat]
    (r,) = evaluate(parse(extra, base=base), rec)
    assert r.facts["grew"] is False and r.status == "fail"
    assert "never pushed the model distance above 2 x" in r.detail
    (r,) = evaluate(parse(extra + "min_growth = 1.1\n", base=base), rec)
    assert r.facts["grew"] is True and r.status == "pass"


def test_exchange_progress_stall_is_broken_by_missing_samples():
    def s(t, rounds):
        return {"t": t, "ok": rounds is not None, "rounds": rounds, "why": "frozen"}

    rec = _record(
        {
            "a": [s(0, 1), s(1, 2), s(2, 2), s(3, 2), s(4, 3)],  # stalled 2 s
            "c": [s(0, 1), s(1, 1), s(2, None), s(9, 1), s(10, 2)],  # the gap is not a stall
        }
    )
    (r,) = _check("[[assert]]\nkind = 'exchange_progress'\n", rec)
    assert r.per_peer == {"a": 2.0, "c": 1.0}
    assert r.threshold == pytest.approx(2.0 + 2 * 1.0)  # exchange-timeout + 2 samples
    assert r.status == "pass"


def test_max_pairwise_distance_is_exact_for_close_models():
    rng = np.random.default_rng(0)
    base = rng.normal(size=10_000).astype(np.float32) * 100
    other = base.copy()
    other[7] += np.float32(0.0078125)  # representable at this magnitude
    assert max_pairwise_distance([base, other, base]) == pytest.approx(0.0078125, rel=1e-6)
    assert max_pairwise_distance([base]) is None
    bad = base.copy()
    bad[0] = np.nan
    assert max_pairwise_distance([base, bad]) == math.inf


def test_relative_position_tells_an_alie_model_from_an_honest_one():
    """ALIE crafts m' - z s' from views a round old (m', s'); the shift along the honest spread
    measured now still shows z on average, while an honest peer's own model shows ~0 (one
    sample is noisy with 4 honest views: the real-run test averages several, as this does)."""
    from swarmnode.fault.chaos.probe import relative_position
    from swarmnode.fault.inject.byzantine import Alie

    rng = np.random.default_rng(1)
    d = 5000
    scale = rng.gamma(0.5, size=d)  # uneven spread over coordinates, as in a real model

    def peers(at):
        return [at + scale * rng.normal(size=d) for _ in range(4)]

    alie, honest = [], []
    for _ in range(8):
        stale = peers(rng.normal(size=d))
        drifted = stale[0] + scale * rng.normal(size=d)  # a whole spread's worth of drift
        now = peers(drifted)
        crafted = Alie(z=0.25).poison(np.asarray(stale[0], np.float32), np.asarray(stale))
        alie.append(relative_position(crafted, now)["std_shift"])
        honest.append(relative_position(drifted + scale * rng.normal(size=d), now)["std_shift"])
    assert np.mean(alie) == pytest.approx(0.25, abs=0.06)
    assert abs(np.mean(honest)) < 0.06
    one = relative_position(crafted, now)
    assert min(one["nearest"], one["from_mean"], one["honest_from_mean"]) > 0
    bad = crafted.copy()
    bad[3] = np.inf
    assert relative_position(bad, now)["nearest"] == math.inf
    assert relative_position(crafted, []) is None
