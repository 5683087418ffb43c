"""The network lab with real peers in real namespaces (root only; CI runs as root).

Peers on distinct addresses find each other through --advertise, and a cut link is detected
(the others declare the peer behind it suspect, then dead) and healed (it comes back alive and
trains on) like a crash and a restart, without one.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from scripts.netlab import net
from scripts.netlab.lab import Lab
from tests.waiting import wait_for

_WHY = net.can_use_namespaces()
pytestmark = [
    pytest.mark.slow,
    pytest.mark.timeout(180),
    pytest.mark.skipif(_WHY is not None, reason=f"network lab: {_WHY}"),
]

# train until stopped, paced so three peers leave the (shared) CPU some room
PEER_ARGS = ["--steps", "0", "--slowdown", "20", "--gossip-interval", "0.2"]


@pytest.fixture
def lab(tmp_path: Path) -> Iterator[Lab]:
    with Lab(["1gbit", "100mbit", "20mbit"], tmp_path, PEER_ARGS) as running:
        yield running
    assert not [t for t in net._tags_in_use() if t == running.net.tag], "lab left links behind"


def members(lab: Lab, i: int) -> dict[str, dict]:
    return {m["addr"]: m for m in lab.status(i)["members"]}


def test_peers_find_each_other_through_advertised_addresses(lab: Lab) -> None:
    addrs = [p.addr for p in lab.peers]
    assert len({a.split(":")[0] for a in addrs}) == 3
    for i in range(3):
        assert lab.status(i)["self"]["addr"] == addrs[i]
        others = set(addrs) - {addrs[i]}
        wait_for(
            lambda i=i, others=others: all(
                members(lab, i).get(a, {}).get("state") == "alive" for a in others
            ),
            30,
            f"p{i} to see the others alive at their advertised addresses",
        )


def test_cut_link_is_detected_and_healed(lab: Lab) -> None:
    far = lab.peers[2].addr
    wait_for(lambda: members(lab, 0).get(far, {}).get("state") == "alive", 30, "p2 alive")
    lab.cut(2)
    wait_for(lambda: members(lab, 0)[far]["state"] == "dead", 30, "p0 to declare p2 dead")
    assert lab.peers[2].proc.poll() is None  # nothing crashed: only the link is gone
    lab.restore(2)
    wait_for(lambda: members(lab, 0)[far]["state"] == "alive", 60, "p2 back alive after heal")
    step = lab.status(2)["self"]["step"]
    wait_for(lambda: lab.status(2)["self"]["step"] > step, 30, "p2 training after the heal")


def test_a_held_lab_releases_every_peer_together(tmp_path: Path) -> None:
    """`hold`: the peers start held and are released by a signed admin request once all are up,
    so no peer trains alone while the others start (bench_lab's default)."""
    args = ["--steps", "0", "--gossip-interval", "0.2", "--model", "mlp:32", "--data", "digits"]
    with Lab(["1gbit", "100mbit"], tmp_path, args, [1.0, 4.0], hold=True) as lab:
        assert lab.held_s(0) > lab.held_s(1) >= 0  # the seed waited for the joiner
        for i in range(2):  # released: each peer trains on at its own pace
            step = lab.status(i)["self"]["step"]
            wait_for(lambda i=i, s=step: lab.status(i)["self"]["step"] > s + 20, 60, f"p{i} steps")


def test_a_seed_that_ends_before_the_others_are_up_is_one_clear_error(tmp_path: Path) -> None:
    """The README's lab line once ended in a second, and with fewer steps failed with a
    traceback after the joiner's 30 s join timeout: the seed had trained its steps alone."""
    with pytest.raises(net.NetLabError, match=r"the seed p0 exited .* use --hold"):
        with Lab(["1gbit", "1gbit"], tmp_path, ["--steps", "5", "--model", "mlp:8"]):
            pass
