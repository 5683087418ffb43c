"""Real peer processes on loopback: join, failure detection, leave, state sync, restart."""

from __future__ import annotations

import signal
import socket
import time

import pytest
from swarmnode.node.peer.node import CLOSE_BUDGET_S
from swarmnode.node.train.checkpoint import list_checkpoints

from tests.integration.peers import Peer
from tests.waiting import free_port, wait_for

pytestmark = [pytest.mark.slow, pytest.mark.timeout(240)]


@pytest.fixture
def swarm(tmp_path):
    peers: list[Peer] = []

    def spawn(name: str, *args: str) -> Peer:
        peer = Peer(tmp_path, name, *args)
        peers.append(peer)
        return peer.start()

    yield spawn
    for p in peers:
        p.stop()


def alive_view(peer: Peer, others: list[Peer]) -> bool:
    return all(peer.member_state(o) == "alive" for o in others)


def test_join_kill_leave_and_state_sync(swarm):
    a = swarm("a", "--steps", "0")
    b = swarm("b", "--steps", "0", "--join", a.addr)
    c = swarm("c", "--steps", "0", "--join", b.addr)  # any live peer is an entry point
    peers = [a, b, c]
    for p in peers:
        wait_for(
            lambda p=p: alive_view(p, [o for o in peers if o is not p]), 20, f"{p.name} to see all"
        )

    # A newcomer starts from the swarm's model: its first accuracy is the swarm's, not chance.
    wait_for(lambda: (a.status()["self"]["acc"] or 0) > 0.8, 60, "the swarm to learn")
    d = swarm("d", "--steps", "0", "--join", a.addr, "--eval-every", "100000")
    first = d.status()["self"]
    assert first["acc"] is not None and first["acc"] > 0.7, first
    wait_for(lambda: alive_view(a, [d]), 10, "a to see d")

    c.signal(signal.SIGKILL)
    for p in (a, b, d):
        wait_for(lambda p=p: p.member_state(c) == "dead", 15, f"{p.name} to mark c dead")

    b.signal(signal.SIGTERM)
    assert b.wait_exit(10) == 0
    for p in (a, d):
        wait_for(lambda p=p: p.member_state(b) == "left", 5, f"{p.name} to mark b left")


def warnings_of(peer: Peer) -> list[str]:
    """Its WARNING lines, but those about the shared box's load (a stalled event loop)."""
    assert peer.process is not None
    lines = peer.process.log_path.read_text(errors="replace").splitlines()
    return [ln for ln in lines if " WARNING " in ln and "event loop stalled" not in ln]


def test_a_clean_leave_leaves_no_warning_behind_on_the_others(swarm):
    """After one peer left with SIGINT, every other logged 'marked left without its own signed
    leave' several times a second for the rest of the run: they relayed its alive record with
    a `left` hint. Now the signed leave itself travels, and nothing is logged but the leave."""
    gossip = ["--steps", "0", "--gossip-interval", "0.2", "--secret", "s"]
    a = swarm("a", *gossip)
    b = swarm("b", *gossip, "--join", a.addr)
    c = swarm("c", *gossip, "--join", a.addr)
    for p in (a, b):
        wait_for(lambda p=p: alive_view(p, [o for o in (a, b, c) if o is not p]), 20, "all")
    c.signal(signal.SIGINT)
    assert c.wait_exit(10) == 0
    for p in (a, b):
        wait_for(lambda p=p: p.member_state(c) == "left", 5, f"{p.name} to mark c left")
    beat = next(m["heartbeat"] for m in a.status()["members"] if m["peer_id"] == b.peer_id)

    def rounds_later() -> bool:  # the flood came several times a second: 20 rounds is plenty
        now = next(m["heartbeat"] for m in a.status()["members"] if m["peer_id"] == b.peer_id)
        return now >= beat + 20

    wait_for(rounds_later, 30, "20 gossip rounds after the leave")
    for p in (a, b):
        assert warnings_of(p) == [], f"{p.name} logged a warning after a clean leave"
        log = p.process.log_path.read_text()
        who = f"{c.name} ({c.peer_id[:8]}) (127.0.0.1:"  # a named member: name (id prefix)
        assert log.count(who) >= 2  # its join and its leave, once each
        assert log.count(f"{who}{c.addr.rsplit(':', 1)[1]}) alive -> left") == 1


def test_restarted_peer_is_taken_back_under_its_id(swarm, tmp_path):
    a = swarm("a", "--steps", "0")
    b = swarm("b", "--steps", "0", "--join", a.addr)
    wait_for(lambda: alive_view(a, [b]), 20, "a to see b")
    old_id = b.peer_id
    b.signal(signal.SIGKILL)
    b.wait_exit(10)
    wait_for(lambda: a.member_state(b) == "dead", 15, "a to mark b dead")
    b.start()
    assert b.peer_id == old_id
    wait_for(lambda: a.member_state(b) == "alive", 15, "a to take b back")


def _accepts(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(0.5)
        return s.connect_ex(("127.0.0.1", port)) == 0


# SIGTERM -> exit within 5 s is the target on an idle machine (scripts/bench/membership/liveness.py
# --mode real reports the measured times). A test cannot hold a loaded CI box to a wall-clock
# figure (one fresh-clone run took 11.1 s against a 6.0 s bound), so the tests below hold what the
# target means: a peer's exit waits at most its close budget for the step in progress, on top of
# what any clean exit costs on this machine right now, measured in the same test.
EXIT_BOUND_S = 5.0 + 1.0


def _sigterm_to_exit_s(peer: Peer) -> float:
    t0 = time.monotonic()
    peer.signal(signal.SIGTERM)
    assert peer.wait_exit(60) == 0, peer.tail()
    return time.monotonic() - t0


def test_sigterm_in_the_middle_of_a_multi_second_step_waits_no_longer_than_the_close_budget(
    swarm,
):
    # the machine's cost of a clean exit now: a peer with a step of a millisecond
    idle = swarm("idle", "--steps", "0")
    wait_for(lambda: idle.status()["self"]["step"] >= 1, 60, "idle to finish a step")
    baseline = _sigterm_to_exit_s(idle)
    # a 17 M-parameter MLP on the whole train set per step: ~2 s of BLAS per step on one core
    h = swarm(
        "h", "--steps", "0", "--model", "mlp:4096,4096", "--batch-size", "1437", "--eval-every", "1"
    )
    wait_for(lambda: h.status()["self"]["step"] >= 1, 60, "h to finish a step")
    took = _sigterm_to_exit_s(h)
    assert took < CLOSE_BUDGET_S + 2 * baseline + 1.0, (took, baseline, h.tail())
    out = h.tail(30)
    assert "SIGTERM: leaving the swarm" in out
    # either the step ended in time and the final checkpoint holds it, or it was abandoned and
    # the peer says so: never a silent loss
    saved = [step for step, _ in list_checkpoints(h.dir / "ckpt")]
    assert (saved and max(saved) >= 1) or "without a final checkpoint" in out, (saved, out)


def test_sigterm_while_still_joining_exits_cleanly(tmp_path):
    port, dead_seed = free_port(), free_port()
    p = Peer(tmp_path, "j", "--listen", f"127.0.0.1:{port}", "--join", f"127.0.0.1:{dead_seed}")
    p.args = (*p.args, "--join-timeout", "120")
    try:
        p.launch()
        # the port is bound before the join starts, and the signal handlers before that
        wait_for(lambda: _accepts(port), 60, "j to bind its port")
        assert p.proc is not None and p.proc.poll() is None, p.tail()
        t0 = time.monotonic()
        p.signal(signal.SIGTERM)
        assert p.wait_exit(30) == 0, p.tail()
        assert time.monotonic() - t0 < EXIT_BOUND_S, p.tail()
        assert "stopped before the peer was up" in p.tail(), p.tail()
    finally:
        p.stop()
