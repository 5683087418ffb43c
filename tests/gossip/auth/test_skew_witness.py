"""Whose clock is off (gossip/auth/skew_witness.py), through `Signer.open`: only senders proven
by a member's key are witnesses that this peer's own clock is off, and names that no key
proves cannot fill what is said. Fake clocks: exact and immune to CPU load."""

from __future__ import annotations

import logging

import pytest
from swarmnode.gossip.auth import skew_witness
from swarmnode.gossip.auth.peer_key import PeerKey
from swarmnode.gossip.auth.replay import MAX_OFFSET_S, ClockSkew
from swarmnode.gossip.auth.signer import SIGNED_ROUTES, Signer

pytestmark = pytest.mark.timeout(30)

SECRET = "correct horse battery staple"
NOW = 1_700_000_000.0
AHEAD = MAX_OFFSET_S + 90  # refused: past the tolerated offset


def _said(caplog: pytest.LogCaptureFixture, text: str) -> list[str]:
    return [
        r.getMessage()
        for r in caplog.records
        if r.levelno == logging.WARNING and text in r.getMessage()
    ]


def _receiver(members: dict[str, bytes]) -> Signer:
    return Signer(
        SECRET,
        name="a:1",
        key=PeerKey.generate(),
        keys=members.get,
        signed_routes=SIGNED_ROUTES,
        clock=lambda: NOW,
    )


def _refused(me: Signer, sealed: bytes | memoryview, route: str) -> None:
    with pytest.raises(ClockSkew):
        me.open(route, sealed)


def test_made_up_names_agreeing_do_not_make_a_peer_blame_its_own_clock(caplog) -> None:
    # any holder of the secret may write any sender's name: two fake names off by the same
    # amount once read as "two members agree", and the peer said its own clock was off
    caplog.set_level(logging.DEBUG)
    me = _receiver({})
    for name in ("fake:1", "fake:2", "fake:3"):
        liar = Signer(SECRET, name=name, clock=lambda: NOW + AHEAD)
        _refused(me, liar.seal("gossip", b"x", to="a:1"), "gossip")
    assert not _said(caplog, "most likely off")
    assert len(_said(caplog, "the clock of fake:")) == 3  # each still said, once
    assert me.skews.proven == {}


def test_two_members_keys_agreeing_blame_this_peer_s_clock_once(caplog) -> None:
    caplog.set_level(logging.INFO)
    keys = [PeerKey.generate() for _ in range(3)]
    me = _receiver({k.peer_id: k.public for k in keys})
    for i, key in enumerate(keys):
        peer = Signer(
            SECRET,
            name=f"b:{i}",
            key=key,
            signed_routes=SIGNED_ROUTES,
            clock=lambda: NOW + AHEAD,
        )
        for _ in range(2):  # a sender's second request says nothing new
            _refused(me, peer.seal("pushpull", b"x", to="a:1"), "pushpull")
    assert len(_said(caplog, "most likely off")) == 1
    assert len(_said(caplog, "the clock of b:")) == 3
    assert set(me.skews.proven) == {k.peer_id for k in keys}


def test_made_up_names_cannot_fill_what_is_said_or_keep_a_member_from_being_said(
    caplog,
) -> None:
    caplog.set_level(logging.INFO)
    key = PeerKey.generate()
    me = _receiver({key.peer_id: key.public})
    for i in range(skew_witness.UNPROVEN_SAID + 300):  # more than every table holds
        liar = Signer(SECRET, name=f"fake:{i}", clock=lambda: NOW + AHEAD)
        _refused(me, liar.seal("gossip", b"x", to="a:1"), "gossip")
    assert len(_said(caplog, "the clock of fake:")) == skew_witness.UNPROVEN_SAID
    assert len(me.skews.said) == skew_witness.UNPROVEN_SAID  # bounded
    member = Signer(
        SECRET, name="b:1", key=key, signed_routes=SIGNED_ROUTES, clock=lambda: NOW + AHEAD
    )
    _refused(me, member.seal("pushpull", b"x", to="a:1"), "pushpull")
    assert len(_said(caplog, "the clock of b:1")) == 1  # a member is still said
    assert key.peer_id in me.skews.proven
