"""Issue 22's scenario keys: the control swarm ([control], fault/chaos/control.py) and the
control_* assertions on synthetic records, the drag and many-source sybil events, and the
drag's aim (which coordinates are hidden biases). The real runs are in
test_hostile_scenarios_real.py."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from swarmnode.fault.chaos.assertions import RunRecord, evaluate
from swarmnode.fault.chaos.control import control_scenario
from swarmnode.fault.chaos.scenario import ScenarioError, parse_scenario_text
from swarmnode.fault.hostile.drag import DragError, hidden_biases
from swarmnode.fault.hostile.sybils import source_addresses
from swarmnode.kernels.backend import select_backend
from swarmnode.node.train.data.datasets import load_dataset
from swarmnode.node.train.model.builtin import build_model

pytestmark = pytest.mark.timeout(30)

BASE = """
[scenario]
duration = 30
[node]
model = "mlp:16"
[[peer]]
name = "a"
[[peer]]
name = "b"
"""
DRAG = "[[event]]\nat = 10\naction = 'hostile'\nkind = 'drag'\npeer = 'a'\nrate = 150\nid = 'd'\n"
CONTROL = "[control]\npeer = 'x'\nstep_time = 0.2\n"


def test_an_outside_attackers_seat_keeps_its_shard_and_the_control_fills_it() -> None:
    sc = parse_scenario_text(BASE + DRAG + CONTROL)
    assert sc.shards == 3 and sc.control is not None and sc.control.flags == {"step-time": 0.2}
    (drag,) = sc.events
    assert (drag.kind, drag.rate, drag.duration) == ("drag", 150.0, 20.0)
    ctrl = control_scenario(sc)
    assert [(p.name, p.index, p.flags) for p in ctrl.peers] == [
        ("a", 0, {}),
        ("b", 1, {}),
        ("x", 2, {"step-time": 0.2}),
    ]
    assert ctrl.events == () and ctrl.assertions == () and ctrl.control is None
    assert ctrl.shards == 3 and ctrl.name.endswith("-control")


def test_a_byzantine_seat_turns_honest_and_slow_in_the_control() -> None:
    text = BASE + "[[peer]]\nname = 'x'\nbyzantine = 'dissensus:4'\n" + CONTROL
    text += "[[event]]\nat = 5\naction = 'byzantine'\npeer = 'x'\nkind = 'ipm'\n"
    sc = parse_scenario_text(text)
    assert sc.shards == 3  # the liar is a peer: no seat of its own
    ctrl = control_scenario(sc)
    assert ctrl.flags_for("x") == {"model": "mlp:16", "step-time": 0.2}
    assert ctrl.events == ()  # its byzantine event is the attack: not in the control


@pytest.mark.parametrize(
    ("text", "why"),
    [
        (CONTROL.replace("peer = 'x'", "peer = 'X Y'"), "'peer' must match"),
        (CONTROL + "byzantine = 'ipm'\n", "the control's peer is honest"),
        (CONTROL + "listen = 'x'\n", "set by the chaos runner"),
        ("[[assert]]\nkind = 'control_rounds'\n", "needs a \\[control\\] table"),
    ],
)
def test_a_bad_control_is_refused_before_anything_runs(text: str, why: str) -> None:
    with pytest.raises(ScenarioError, match=why):
        parse_scenario_text(BASE + DRAG + text)


@pytest.mark.parametrize(
    ("change", "why"),
    [
        ("kind = 'drag'\nsources = 4", "only for kind = 'sybil-flood'"),
        ("kind = 'sybil-flood'\nsources = 300", "outside"),
        ("kind = 'sybil-flood'\nsources = 4\nsource_net = '127.1.0.0/30'", "fewer than 4"),
        ("kind = 'sybil-flood'\nlisten = 1", "true or false"),
    ],
)
def test_bad_source_keys_are_refused(change: str, why: str) -> None:
    with pytest.raises(ScenarioError, match=why):
        parse_scenario_text(BASE + DRAG.replace("kind = 'drag'", change))


def test_sybil_sources_spread_over_prefixes_or_fill_one() -> None:
    sc = parse_scenario_text(
        BASE + DRAG.replace("kind = 'drag'", "kind = 'sybil-flood'\nsources = 63\nlisten = true")
    )
    (e,) = sc.events
    assert (e.sources, e.source_net, e.listen, e.everyone) == (63, "127.1.0.0/16", True, False)
    assert source_addresses("127.1.0.0/16", 3) == ["127.1.0.1", "127.1.1.1", "127.1.2.1"]
    assert source_addresses("127.1.5.0/24", 3) == ["127.1.5.1", "127.1.5.2", "127.1.5.3"]


def _samples(acc: float, applied_per_s: float) -> list[dict[str, Any]]:
    return [
        {"t": float(t), "ok": True, "acc": acc, "applied": applied_per_s * t} for t in range(31)
    ]


def _record(acc: float, rate: float, control: RunRecord | None) -> RunRecord:
    return RunRecord(
        samples={n: _samples(acc, rate) for n in ("a", "b")},
        distances=[],
        timeline=[],
        peer_ids={},
        final_state={"a": "running", "b": "running"},
        end_t=30.0,
        hostile=[{"kind": "drag", "peer": "a", "id": "d", "start": 10.0, "end": 20.0}],
        control=control,
        control_result=None if control is None else "pass",
    )


ASSERTS = """
[[assert]]
kind = "control_accuracy"
at = 20
max_drop = 0.05
[[assert]]
kind = "control_rounds"
min_ratio = 0.7
"""


def test_the_control_assertions_compare_the_same_peers_of_both_runs() -> None:
    sc = parse_scenario_text(BASE + DRAG + CONTROL + ASSERTS)
    control = _record(0.64, 4.0, None)
    control.samples["x"] = _samples(0.2, 0.4)  # the slow peer: not compared
    acc, rounds = evaluate(sc, _record(0.62, 3.0, control))
    assert acc.measured == pytest.approx(-0.02) and acc.status == "pass"
    assert rounds.measured == pytest.approx(0.75) and rounds.status == "pass"
    assert rounds.facts["span"] == [10.0, 20.0]  # the attack's
    acc, rounds = evaluate(sc, _record(0.10, 0.4, control))  # the attack worked
    assert acc.status == "fail" and rounds.status == "fail"
    acc, rounds = evaluate(sc, _record(0.62, 3.0, None))  # no control: no verdict but a fail
    assert acc.measured is None and "no control record" in acc.detail
    assert rounds.status == "no data" and not rounds.ok  # a run without its control fails


def test_hidden_biases_are_the_hidden_layers_bias_slices() -> None:
    for model, data in (("mlp:64", "signal:200,64,20"), ("mlp:8,4", "digits")):
        ranges = hidden_biases(model, data)
        ds = load_dataset(data)
        m = build_model(model, ds.input_shape, ds.n_classes, select_backend("cpu"), 0)
        last = max(int(name.split(".")[0]) for name in m.params.offsets)
        want = [
            m.params.offsets[name]
            for name in sorted(m.params.offsets, key=lambda n: m.params.offsets[n])
            if name.endswith(".b") and int(name.split(".")[0]) != last
        ]
        assert ranges == want
        assert all(np.all(m.params.views[f"{i}.b"] == 0) for i in (1,))  # biases start at 0
    with pytest.raises(DragError, match="dense ReLU"):
        hidden_biases("cnn1d:8k3", "digits")
    with pytest.raises(DragError, match="shapes of"):
        hidden_biases("mlp:8", "file.npz")
