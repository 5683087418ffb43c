"""`SwarmLR` (the lr scaled with the swarm size) and `Pacer` (a fixed simulated step time)."""

from __future__ import annotations

import math
import threading
import time

import pytest
from swarmnode.node.train.lr.scale import SwarmLR
from swarmnode.node.train.pacing import Pacer

pytestmark = pytest.mark.timeout(30)


def test_a_peer_alone_keeps_its_lr_whatever_the_rule():
    for rule in ("none", "sqrt", "linear", "adaptive"):
        s = SwarmLR(rule, max_n=8, warmup=10)
        assert [s.advance() for _ in range(20)] == [1.0] * 20


def test_the_scale_warms_up_linearly_to_the_rule_of_n():
    s = SwarmLR("linear", max_n=8, warmup=4)
    s.set_size(4)
    assert [s.advance() for _ in range(6)] == [1.75, 2.5, 3.25, 4.0, 4.0, 4.0]
    root = SwarmLR("sqrt", max_n=8, warmup=0)
    root.set_size(4)
    assert root.advance() == 2.0


def test_it_falls_at_once_when_peers_leave_and_rises_again_by_the_warm_up():
    s = SwarmLR("linear", max_n=8, warmup=10)
    s.set_size(5)
    for _ in range(50):
        s.advance()
    assert s.scale == 5.0
    s.set_size(2)  # three left: the next step already uses the smaller lr
    assert s.advance() == 2.0
    s.set_size(3)  # one joined: no jump
    assert s.advance() == pytest.approx(2.2)


def test_listed_peers_beyond_the_cap_buy_nothing():
    s = SwarmLR("linear", max_n=8, warmup=0)
    s.set_size(10_000)  # sybil members in the table
    assert s.advance() == 8.0
    s.set_size(0)  # nonsense from a caller is read as alone, never as a zero lr
    assert s.advance() == 1.0


def test_bad_settings_are_refused():
    with pytest.raises(ValueError, match="one of"):
        SwarmLR("cubic")
    with pytest.raises(ValueError):
        SwarmLR("linear", max_n=0)


def test_step_time_pads_a_step_to_a_fixed_length_whatever_its_compute():
    p = Pacer(threading.Event())
    p.set(step_s=0.01)
    assert p.pause_for(0.002) == pytest.approx(0.008)
    assert p.pause_for(0.03) <= 0  # a slower step is not slowed further
    p.set(slowdown=3.0, step_s=0.01)  # the larger of the two pauses
    assert p.pause_for(0.004) == pytest.approx(0.008)
    for bad in ({"step_s": -1.0}, {"step_s": math.nan}, {"step_s": 61.0}, {"slowdown": 0.5}):
        with pytest.raises(ValueError):
            p.set(**bad)


def test_a_new_setting_ends_a_pause_at_once():
    wake = threading.Event()
    p = Pacer(wake)
    p.set(step_s=30.0)
    threading.Timer(0.05, p.set).start()  # back to full speed from another thread
    t0 = time.monotonic()
    p.pause(0.0)
    assert time.monotonic() - t0 < 10
