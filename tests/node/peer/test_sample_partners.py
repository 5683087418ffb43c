"""`MembershipPeers.sample_partners` (issue 31): one uniform draw over the dialable members and
the outbound-only ones that pushed lately; the outbound ones are returned apart, never dialled."""

from __future__ import annotations

import random
from collections import Counter
from types import SimpleNamespace

import pytest
from swarmnode.gossip.membership import OUTBOUND, REACH
from swarmnode.node.peer.limits import MembershipPeers

pytestmark = pytest.mark.timeout(30)


class _Members:
    def __init__(self, live: list[SimpleNamespace]) -> None:
        self.live = live

    def live_peers(self) -> list[SimpleNamespace]:
        return self.live


def _m(pid: str, outbound: bool = False) -> SimpleNamespace:
    meta = {REACH: OUTBOUND} if outbound else {}
    return SimpleNamespace(peer_id=pid, addr=f"{pid}:7070", meta=meta)


def test_each_member_is_drawn_alike_and_an_outbound_one_is_never_dialled():
    live = [_m(f"d{i}") for i in range(4)] + [_m(f"o{i}", outbound=True) for i in range(4)]
    peers = MembershipPeers(_Members(live), random.Random(0))
    dialled, awaited = Counter(), Counter()
    n = 4000
    for _ in range(n):
        dial, drawn = peers.sample_partners(3, {"o0", "o1", "o2", "o3"})
        assert len(dial) + len(drawn) == 3 and len(set(drawn)) == len(drawn)
        dialled.update(pid for pid, _ in dial)
        awaited.update(drawn)
    assert set(dialled) == {f"d{i}" for i in range(4)}  # only dialable members are dialled
    assert set(awaited) == {f"o{i}" for i in range(4)}
    for count in (*dialled.values(), *awaited.values()):  # 3/8 of the draws each
        assert abs(count / n - 3 / 8) < 0.04, (dialled, awaited)


def test_an_outbound_member_that_did_not_push_lately_is_not_drawn():
    live = [_m("d0"), _m("o0", outbound=True), _m("o1", outbound=True)]
    peers = MembershipPeers(_Members(live), random.Random(1))
    for _ in range(50):
        dial, drawn = peers.sample_partners(3, {"o1", "d0"})  # o0 never pushed; d0 is dialled
        assert [pid for pid, _ in dial] == ["d0"] and drawn == ["o1"]
    dial, drawn = peers.sample_partners(3, set())  # nobody pushed: as `sample`
    assert [pid for pid, _ in dial] == ["d0"] and drawn == []
