"""Outbound-only peers and the dial-back self-check (issue 31), on real in-process peers over
aiohttp on 127.0.0.1. A joiner that advertises an address where nothing listens is what a peer
behind a NAT looks like to the swarm: its dials out work, a dial to it fails."""

from __future__ import annotations

import logging
import socket

import pytest
from swarmnode.gossip.auth import AuthTransport, Signer, auth_handlers
from swarmnode.gossip.errors import RemoteError
from swarmnode.gossip.membership import OUTBOUND, REACH
from swarmnode.gossip.wire import decode_control, encode_control
from swarmnode.node.net import HttpTransport
from swarmnode.node.peer.node import Node
from swarmnode.node.peer.reach import (
    OUTBOUND_RECHECK_S,
    DialRate,
    ReachWatch,
    dialback_handlers,
)
from swarmnode.node.peer.status_routes import status_json

from tests.integration.inprocess import peer_config
from tests.waiting import eventually

pytestmark = pytest.mark.timeout(90)


def _closed_port() -> int:
    """A port nothing listens on (bound, then released: a dial there is refused)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


async def _swarm_with_home(caplog, **home_kw):
    a = await Node.create(peer_config(name="a"))
    b = await Node.create(peer_config(name="b", join=[a.addr]))
    with caplog.at_level(logging.INFO):
        home = await Node.create(peer_config(name="home", join=[a.addr], **home_kw))
    return a, b, home


async def test_a_peer_nobody_can_dial_says_so_once_and_trains_outbound_only(caplog):
    nowhere = f"127.0.0.1:{_closed_port()}"
    a, b, home = await _swarm_with_home(caplog, advertise=nowhere)
    try:
        lines = [r for r in caplog.records if r.name == "swarmnode.node.peer.reach"]
        assert len(lines) == 1 and lines[0].levelno == logging.INFO, lines
        text = lines[0].getMessage()
        assert nowhere in text and "outbound-only" in text
        assert f"forward port {nowhere.rpartition(':')[2]}" in text and "--advertise" in text
        assert home.membership.table.meta[REACH] == OUTBOUND
        # nothing that looks like a fault: the failed dial back is the expected answer
        faults = [r for r in caplog.records if r.levelno >= logging.WARNING]
        assert not [r for r in faults if r.name != "swarmnode.node.train.worker"], faults
        for n in (a, b):  # its record spread from its own pushes; it is never a dial target
            await eventually(
                lambda n=n: (
                    (m := n.membership.get(home.peer_id)) is not None
                    and m.meta.get(REACH) == OUTBOUND
                ),
                20,
                f"{n.name} to learn home is outbound-only",
            )
            assert home.peer_id not in {m.peer_id for m in n.membership.dialable_peers()}
            assert home.peer_id not in {pid for pid, _ in n.exchanger.peers.sample(8)}
        # it trains with the swarm: its own push-pulls land, and the others serve them
        await eventually(lambda: home.exchanger.rounds_applied >= 3, 30, "home's rounds")
        served = a.exchanger.served + b.exchanger.served
        assert served >= 3
        # and nobody declares it dead although nobody can dial it (its gossip carries it)
        for n in (a, b):
            assert str(n.membership.get(home.peer_id).state) == "alive"
        assert status_json(home)["self"]["reach"] == OUTBOUND
        rows = {r["peer_id"]: r for r in status_json(a)["members"]}
        assert rows[home.peer_id]["reach"] == OUTBOUND and rows[b.peer_id]["reach"] == "direct"
    finally:
        for n in (home, b, a):
            await n.close()


async def test_a_dialable_joiner_is_checked_quietly_and_stays_direct(caplog):
    a, b, home = await _swarm_with_home(caplog)
    try:
        assert home.reachable
        assert REACH not in home.membership.table.meta
        assert not [r for r in caplog.records if r.levelno >= logging.INFO and "reach" in r.name]
    finally:
        for n in (home, b, a):
            await n.close()


async def test_reachable_no_forces_outbound_only(caplog):
    a, b, home = await _swarm_with_home(caplog, reachable="no")
    try:
        assert not home.reachable and home.membership.table.meta[REACH] == OUTBOUND
        # a member that says so (true or not) is left alone: nobody dials it, and it loses
        # only the rounds others would have started with it; its own still land
        await eventually(
            lambda: all(
                (m := n.membership.get(home.peer_id)) is not None and m.meta.get(REACH) == OUTBOUND
                for n in (a, b)
            ),
            20,
            "the others to read home's word",
        )
        # a round of theirs that picked home before its word arrived may still be in flight:
        # two more rounds each, and every round since has read it
        rounds = {n.name: n.exchanger.rounds for n in (a, b)}
        await eventually(
            lambda: all(n.exchanger.rounds >= rounds[n.name] + 2 for n in (a, b)),
            30,
            "two more rounds on a and b",
        )
        served = home.exchanger.served
        await eventually(lambda: home.exchanger.rounds_applied >= 3, 30, "home's own rounds")
        for n in (a, b):
            assert home.peer_id not in {pid for pid, _ in n.exchanger.peers.sample(8)}
        assert home.exchanger.served == served
    finally:
        for n in (home, b, a):
            await n.close()


async def test_a_forged_dialback_dials_only_the_askers_own_address_and_is_rate_bound():
    """A member asks `a` to dial a third party: the body's address is ignored, `a` dials the
    address in the asker's signed record; a stranger is refused; asking again is refused."""
    a = await Node.create(peer_config(name="a"))
    asker = await Node.create(peer_config(name="asker", join=[a.addr]))
    third = await Node.create(peer_config(name="third"))  # not in a's swarm
    dialled: list[str] = []
    real = a.links.request

    async def spy(addr, route, body, *, timeout):
        if route == "reach":
            dialled.append(addr)
        return await real(addr, route, body, timeout=timeout)

    a.links.request = spy  # what a's dial-back handler dials through
    handlers = dialback_handlers(a.peer_id, a.membership, a.links, DialRate(burst=4))
    a._handlers.update(auth_handlers({"dialback": handlers["dialback"]}, a.signer))
    a.signer.signed_routes = a.signer.signed_routes | {"dialback"}
    try:
        body = encode_control("dialback", addr=third.addr, peer=third.addr)
        raw = await asker.links.request(a.addr, "dialback", body, timeout=10)
        msg = decode_control(raw, "dialback-ack")
        assert msg["ok"] is True and msg["addr"] == asker.addr
        assert dialled == [asker.addr]  # never the third party
        with pytest.raises(RemoteError) as refused:
            await asker.links.request(a.addr, "dialback", body, timeout=10)
        assert refused.value.status == 429
        assert dialled == [asker.addr]
        # a stranger (no member of a's swarm) signs in vain: refused before any dial
        stranger = HttpTransport()
        try:
            signer = Signer(None, key=third.key, signed_routes={"dialback"}, name=third.addr)
            with pytest.raises(RemoteError) as refused:
                await AuthTransport(stranger, signer).request(
                    a.addr, "dialback", encode_control("dialback"), timeout=10
                )
            assert refused.value.status == 403
        finally:
            await stranger.close()
        assert dialled == [asker.addr]
    finally:
        for n in (third, asker, a):
            await n.close()


def test_dial_rate_bounds_each_asker_and_the_whole():
    now = [0.0]
    rate = DialRate(burst=2, window_s=60.0, every_s=10.0, clock=lambda: now[0])
    assert rate.allow("x") and not rate.allow("x")  # one asker: once per 10 s
    assert rate.allow("y") and not rate.allow("z")  # everyone: 2 per minute
    now[0] = 61.0
    assert rate.allow("x") and rate.allow("z")


def _prompt_dialbacks(*nodes: Node) -> None:
    """Each node's dial-back route without the once-per-10 s bound on one asker, so that a
    test may ask again at once (the bound has its own test above)."""
    for n in nodes:
        handlers = dialback_handlers(n.peer_id, n.membership, n.links, DialRate(every_s=0.0))
        n._handlers.update(auth_handlers({"dialback": handlers["dialback"]}, n.signer))


async def test_a_peer_whose_address_moves_is_checked_again_and_its_word_follows(caplog):
    """Dialable at start; then its host's address changes and another machine answers at the
    old one: the watch checks again, the peer goes outbound-only and says what to fix; once
    the old address is its own again, the next check makes it dialable again."""
    a, b, home = await _swarm_with_home(caplog)
    _prompt_dialbacks(a, b)
    real_reach = home._handlers["reach"]

    async def someone_else(req):
        return encode_control("reach-ack", peer_id="f" * 64, nonce="")

    moved = f"10.99.0.1:{home.addr.rpartition(':')[2]}"

    async def now_at():
        return moved

    try:
        assert home.reachable
        watch = ReachWatch(home, current_addr=now_at)
        home._handlers["reach"] = someone_else
        caplog.clear()
        with caplog.at_level(logging.INFO):
            await watch.step()
        assert not home.reachable and home.membership.table.meta[REACH] == OUTBOUND
        lines = [r for r in caplog.records if r.name == "swarmnode.node.peer.reach"]
        assert len(lines) == 1 and lines[0].levelno == logging.INFO, lines
        text = lines[0].getMessage()
        assert home.addr in text and moved in text and "another peer answers" in text
        for n in (a, b):  # its new word spreads: nobody dials it now
            await eventually(
                lambda n=n: home.peer_id not in {m.peer_id for m in n.membership.dialable_peers()},
                20,
                f"{n.name} to stop dialling home",
            )
        home._handlers["reach"] = real_reach
        watch.checked_at -= OUTBOUND_RECHECK_S  # the slow recheck of an outbound-only peer
        await watch.step()
        assert home.reachable and home.membership.table.meta[REACH] == "direct"
        for n in (a, b):
            await eventually(
                lambda n=n: home.peer_id in {m.peer_id for m in n.membership.dialable_peers()},
                20,
                f"{n.name} to dial home again",
            )
        faults = [r for r in caplog.records if r.levelno >= logging.WARNING]
        assert not [r for r in faults if r.name != "swarmnode.node.train.worker"], faults
    finally:
        for n in (home, b, a):
            await n.close()
