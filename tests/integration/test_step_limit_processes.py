"""Bounded staleness between real `swarmnode start` processes at full speed (`--max-lead`).

At full speed a digits MLP step takes well under a millisecond and a round tens of ms: without
the bound a peer took 50-230 steps per round (issue 21); with it, at most max-lead x sync-every
steps pass from one round's end to the next, and the time waited shows as utilization < 1.
A partner that dies must not stop the survivor: its failed rounds count as rounds.
"""

from __future__ import annotations

import json
import signal
from typing import Any

import pytest

from tests.integration.peers import HOLD, Peer, set_slowdown, start_swarm
from tests.waiting import wait_for

pytestmark = [pytest.mark.slow, pytest.mark.timeout(120)]

EVERY = 5
ARGS = ["--sync-every", str(EVERY), "--steps", "0", "--exchange-timeout", "2", *HOLD]


def _rounds_at_least(peer: Peer, n: int) -> dict[str, Any] | None:
    me = peer.status()["self"]
    return me if me["exchange"]["rounds"] >= n else None


def test_a_fast_peer_waits_for_its_rounds_and_a_dead_partner_does_not_stop_it(tmp_path):
    summary = tmp_path / "p0-summary.json"
    peers = start_swarm(tmp_path, [[*ARGS, "--summary-json", str(summary)], ARGS])
    a, b = peers
    try:
        set_slowdown(peers, 1)  # full speed
        first = wait_for(lambda: _rounds_at_least(a, 5), 60, "5 rounds")
        last = wait_for(lambda: _rounds_at_least(a, first["exchange"]["rounds"] + 40), 60, "more")
        assert last["utilization"] < 1.0 and last["waited_s"] > 0, last  # the network set the pace
        # `step` moves at evaluations (every 50 steps): loose, but unbounded it was 50-230
        steps = last["step"] - first["step"]
        assert steps / (last["exchange"]["rounds"] - first["exchange"]["rounds"]) < 4 * EVERY, (
            first,
            last,
        )

        b.process.send(signal.SIGKILL)  # no leave announcement: its rounds now fail
        b.process.proc.wait(10)
        killed_at = a.status()["self"]["step"]
        wait_for(lambda: a.status()["self"]["step"] > killed_at + 500, 60, "a to train on")
    finally:
        for p in peers:
            p.stop()
    s = json.loads(summary.read_text())
    assert 0 < s["max_steps_between_rounds"] <= 2 * EVERY, s  # the default --max-lead 2
    assert 0.0 < s["utilization"] < 1.0 and s["waited_s"] > 0, s
