"""The reachability self-check runs again when its answer may have changed (node/peer/reach.py,
`ReachWatch`): the host's address moved, no member dialled a dialable peer for a while, or an
outbound-only peer's slow recheck is due. A fake node, a fake clock, a scripted dial-back."""

from __future__ import annotations

import logging
from types import SimpleNamespace
from typing import Any

import pytest
from swarmnode.gossip.link import is_takes_arriving, takes_arriving
from swarmnode.gossip.membership import OUTBOUND, REACH
from swarmnode.node.peer import reach
from swarmnode.node.peer.reach import (
    DIRECT,
    OUTBOUND_RECHECK_S,
    QUIET_S,
    ReachWatch,
    watch_reach,
)

pytestmark = pytest.mark.timeout(10)

ADDR = "192.168.1.20:7070"


class FakeMembership:
    def __init__(self, live: int = 2) -> None:
        self.meta: dict[str, Any] = {}
        self.live = [SimpleNamespace(peer_id=f"m{i}") for i in range(live)]

    def set_meta(self, **kv: Any) -> None:
        self.meta.update(kv)

    def live_peers(self) -> list[Any]:
        return self.live


class Harness:
    def __init__(self, reachable: bool = True, live: int = 2) -> None:
        self.now = 0.0
        self.addr_now: str | None = ADDR
        self.verdicts: list[tuple[bool | None, str]] = []
        self.node = SimpleNamespace(
            addr=ADDR, reachable=reachable, membership=FakeMembership(live), cfg=None
        )
        self.watch = ReachWatch(self.node, clock=lambda: self.now, current_addr=self._addr)
        self.asked = 0

    async def _addr(self) -> str | None:
        return self.addr_now

    async def ask(self, node: Any) -> tuple[bool | None, str]:
        self.asked += 1
        return self.verdicts.pop(0) if self.verdicts else (True, "")


@pytest.fixture
def h(monkeypatch: pytest.MonkeyPatch) -> Harness:
    harness = Harness()
    monkeypatch.setattr(reach, "ask_dialback", harness.ask)
    return harness


async def test_nothing_is_asked_while_members_dial_us_and_the_address_stays(h: Harness) -> None:
    for _ in range(10):
        h.now += QUIET_S / 2
        h.watch.dialled()  # members' gossip and exchanges reach us
        await h.watch.step()
    assert h.asked == 0 and h.node.reachable


async def test_a_moved_address_is_checked_once_and_found_undialable_says_what_to_fix(
    h: Harness, caplog: pytest.LogCaptureFixture
) -> None:
    h.addr_now = "10.9.8.7:7070"  # another network: the swarm still dials the old address
    h.verdicts = [(False, "m0 tried: timed out")]
    with caplog.at_level(logging.INFO, logger="swarmnode.node.peer.reach"):
        await h.watch.step()
        await h.watch.step()  # the same move again: not asked again
    assert h.asked == 1
    assert not h.node.reachable and h.node.membership.meta[REACH] == OUTBOUND
    (line,) = [r for r in caplog.records if r.levelno >= logging.INFO]
    text = line.getMessage()
    assert line.levelno == logging.INFO and ADDR in text and "10.9.8.7:7070" in text
    assert "outbound-only" in text and "--advertise" in text and "forward port 7070" in text


async def test_a_moved_address_that_still_answers_stays_dialable_quietly(
    h: Harness, caplog: pytest.LogCaptureFixture
) -> None:
    h.addr_now = "10.9.8.7:7070"
    with caplog.at_level(logging.INFO, logger="swarmnode.node.peer.reach"):
        await h.watch.step()
    assert h.asked == 1 and h.node.reachable and REACH not in h.node.membership.meta
    assert not [r for r in caplog.records if r.levelno >= logging.INFO]


async def test_a_dialable_peer_nobody_dials_is_checked_again_at_most_once_a_quiet_spell(
    h: Harness,
) -> None:
    h.now = QUIET_S - 1
    await h.watch.step()
    assert h.asked == 0
    h.now = QUIET_S
    h.verdicts = [(False, "m1 tried: connection refused")]
    await h.watch.step()
    assert h.asked == 1 and not h.node.reachable
    assert h.node.membership.meta[REACH] == OUTBOUND


async def test_silence_in_an_empty_swarm_is_no_reason(monkeypatch: pytest.MonkeyPatch) -> None:
    alone = Harness(live=0)
    monkeypatch.setattr(reach, "ask_dialback", alone.ask)
    alone.now = 10 * QUIET_S
    await alone.watch.step()
    assert alone.asked == 0


async def test_an_outbound_only_peer_finds_a_port_forwarded_since(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    out = Harness(reachable=False)
    out.node.membership.meta[REACH] = OUTBOUND
    monkeypatch.setattr(reach, "ask_dialback", out.ask)
    out.now = OUTBOUND_RECHECK_S - 1
    await out.watch.step()
    assert out.asked == 0  # slow: each recheck costs a member a dial
    out.now = OUTBOUND_RECHECK_S
    with caplog.at_level(logging.INFO, logger="swarmnode.node.peer.reach"):
        await out.watch.step()
    assert out.asked == 1 and out.node.reachable
    assert out.node.membership.meta[REACH] == DIRECT
    assert any("again" in r.getMessage() for r in caplog.records if r.levelno == logging.INFO)


async def test_no_verdict_changes_nothing(h: Harness) -> None:
    h.now = QUIET_S
    h.verdicts = [(None, "")]  # nobody could be asked
    await h.watch.step()
    assert h.node.reachable and REACH not in h.node.membership.meta


@pytest.mark.parametrize(("setting", "signed"), [("yes", True), ("no", True), ("auto", False)])
def test_a_forced_reach_is_not_watched(setting: str, signed: bool) -> None:
    node = SimpleNamespace(cfg=SimpleNamespace(reachable=setting, sign_exchange=signed))
    assert watch_reach(node) is None


async def test_only_answered_member_requests_count_as_dialled() -> None:
    calls: list[str] = []

    async def gossip(req: Any) -> bytes:
        if req == "forged":
            raise PermissionError("bad signature")
        calls.append(req)
        return b"ok"

    now = [0.0]
    node = SimpleNamespace(
        cfg=SimpleNamespace(reachable="auto", sign_exchange=True),
        _handlers={"gossip": gossip, "status": gossip},
    )
    watch = watch_reach(node)
    assert watch is not None
    watch.clock = lambda: now[0]
    watch.dialled_at = 0.0
    now[0] = 5.0
    with pytest.raises(PermissionError):
        await node._handlers["gossip"]("forged")
    assert watch.dialled_at == 0.0
    assert await node._handlers["gossip"]("member") == b"ok" and watch.dialled_at == 5.0
    assert node._handlers["status"] is gossip  # not a member's dial


def test_a_counted_route_still_takes_a_streaming_push() -> None:
    """The watch's wrapper keeps the mark that lets the server answer a signed push-pull while
    its body arrives (dropped, the answer waited for the whole push: half the link's rate)."""

    @takes_arriving
    async def pushpull(req: Any) -> bytes:
        return b"ok"

    async def gossip(req: Any) -> bytes:
        return b"ok"

    node = SimpleNamespace(
        cfg=SimpleNamespace(reachable="auto", sign_exchange=True),
        _handlers={"pushpull": pushpull, "gossip": gossip},
    )
    assert watch_reach(node) is not None
    assert node._handlers["pushpull"] is not pushpull  # wrapped: counted
    assert is_takes_arriving(node._handlers["pushpull"])
    assert not is_takes_arriving(node._handlers["gossip"])  # takes only a whole body, as before
