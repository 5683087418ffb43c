"""Real peer processes on loopback: join, failure detection, leave, state sync, restart."""

from __future__ import annotations

import signal

import pytest

from tests.integration.peers import Peer, wait_for

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
