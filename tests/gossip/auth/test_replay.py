"""The replay guard's per-sender windows (gossip/auth/replay.py): a sender minutes off this
peer's clock is taken, a replay or a held-back message is still refused, memory stays bounded
under a flood of senders, and a restart of the receiver re-opens nothing beyond its bound.

Both clocks are fake (wall and monotonic), so every window is exact whatever the machine's load.
"""

from __future__ import annotations

import logging

import pytest
from swarmnode.gossip.auth.replay import MAX_OFFSET_S, ClockSkew, ReplayGuard
from swarmnode.gossip.auth.signer import Signer
from swarmnode.gossip.errors import AuthError

pytestmark = pytest.mark.timeout(30)


class Clocks:
    """This peer's wall clock and monotonic clock; `step` moves both (real time passing),
    `jump` only the wall clock (this peer's clock set wrong)."""

    def __init__(self) -> None:
        self.wall, self.mono = 1_700_000_000.0, 5_000.0

    def step(self, s: float) -> None:
        self.wall += s
        self.mono += s

    def jump(self, s: float) -> None:
        self.wall += s


@pytest.fixture
def clocks() -> Clocks:
    return Clocks()


def guard_of(clocks: Clocks, **kw: float) -> ReplayGuard:
    return ReplayGuard(clock=lambda: clocks.wall, monotonic=lambda: clocks.mono, **kw)  # type: ignore[arg-type]


def nonce(i: int) -> bytes:
    return i.to_bytes(16, "big")


def test_a_sender_90_s_ahead_is_taken_and_said_tolerated(clocks: Clocks) -> None:
    guard = guard_of(clocks)
    off = guard.check(clocks.wall + 90, nonce(1), sender="c", signed=True)
    assert isinstance(off, ClockSkew) and off.tolerated and off.skew == pytest.approx(-90)
    assert (
        guard.check(clocks.wall + 1, nonce(2), sender="a", signed=True) is None
    )  # in step: nothing said
    reading = guard.clock_of("c-id", "c")
    assert reading is not None and reading.offset == pytest.approx(90) and not reading.refused


def test_a_replay_is_refused_after_a_skewed_sender_s_window_moved(clocks: Clocks) -> None:
    guard = guard_of(clocks)
    first_ts = clocks.wall + 90  # the sender's clock is 90 s ahead
    guard.check(first_ts, nonce(1), sender="c", signed=True)
    held_ts = clocks.wall + 90.5  # a message an attacker holds back
    for i in range(2, 40):  # the sender goes on talking: its window moves with its clock
        clocks.step(2.0)
        guard.check(clocks.wall + 90, nonce(i), sender="c", signed=True)
    with pytest.raises(AuthError, match="replayed"):
        guard.check(first_ts, nonce(1), sender="c", signed=True)
    with pytest.raises(AuthError, match="older than its latest"):  # a fresh nonce: the window
        guard.check(held_ts, nonce(999), sender="c", signed=True)
    # within max_skew of its latest by its own clock: still taken (its messages overtake)
    guard.check(clocks.wall + 90 - 20, nonce(1000), sender="c", signed=True)


def test_a_sender_s_clock_jumping_forward_moves_its_window_at_once(clocks: Clocks) -> None:
    guard = guard_of(clocks)
    guard.check(clocks.wall, nonce(1), sender="c", signed=True)
    clocks.step(1)
    behind = clocks.wall - 1  # sent just now by the old clock, delivered late
    clocks.step(1)
    assert (
        guard.check(clocks.wall + 120, nonce(2), sender="c", signed=True) is not None
    )  # jumped 120 s
    with pytest.raises(AuthError, match="older than its latest"):
        guard.check(behind, nonce(3), sender="c", signed=True)


def test_this_peer_s_own_clock_jumping_moves_no_sender_s_window(clocks: Clocks) -> None:
    guard = guard_of(clocks)
    guard.check(clocks.wall, nonce(1), sender="a", signed=True)
    held = clocks.wall + 0.5
    clocks.step(40)
    guard.check(clocks.wall, nonce(2), sender="a", signed=True)
    clocks.jump(-90)  # this peer's wall clock set 90 s back
    off = guard.check(
        clocks.wall + 90 + 1, nonce(3), sender="a", signed=True
    )  # a's clock did not move
    assert off is not None and off.skew == pytest.approx(-91)
    with pytest.raises(AuthError, match="older than its latest"):  # 40 s behind a's anchor
        guard.check(held, nonce(4), sender="a", signed=True)


def test_a_clock_beyond_the_tolerance_is_refused_and_shown_so(clocks: Clocks) -> None:
    guard = guard_of(clocks)
    with pytest.raises(ClockSkew) as info:
        guard.check(clocks.wall + MAX_OFFSET_S + 100, nonce(1), sender="c", signed=True)
    assert info.value.skew == pytest.approx(-(MAX_OFFSET_S + 100))
    reading = guard.clock_of("c")
    assert reading is not None and reading.refused
    assert reading.offset == pytest.approx(MAX_OFFSET_S + 100)
    clocks.step(1)  # its clock set right: taken, and shown so
    guard.check(clocks.wall, nonce(2), sender="c", signed=True)
    reading = guard.clock_of("c")
    assert reading is not None and not reading.refused and abs(reading.offset) < 1


def test_a_restarted_receiver_takes_a_recording_once_and_never_beyond_its_bound(
    clocks: Clocks,
) -> None:
    recorded = [(clocks.wall - 200, nonce(1)), (clocks.wall - MAX_OFFSET_S - 1, nonce(2))]
    guard = guard_of(clocks)  # no state: as after a restart
    guard.check(
        *recorded[0], sender="b", signed=True
    )  # within max_offset: taken once (the documented price)
    with pytest.raises(AuthError, match="replayed"):
        guard.check(*recorded[0], sender="b", signed=True)
    with pytest.raises(ClockSkew):
        guard.check(*recorded[1], sender="b", signed=True)
    # the nonce is kept as long as rule 1 would take the message, then forgotten
    clocks.step(MAX_OFFSET_S - 200)
    with pytest.raises(AuthError, match="replayed"):
        guard.check(*recorded[0], sender="b", signed=True)
    clocks.step(guard.max_skew + 1)
    with pytest.raises(ClockSkew):
        guard.check(*recorded[0], sender="b", signed=True)
    guard.check(clocks.wall, nonce(3), sender="b", signed=True)
    assert len(guard) == 1


def test_a_flood_of_fresh_senders_bounds_memory_and_reopens_no_replay(clocks: Clocks) -> None:
    guard = guard_of(clocks, max_nonces=64, max_senders=8)
    honest = [(clocks.wall + 90, nonce(i)) for i in range(5)]  # a member 90 s ahead
    for ts, n in honest:
        guard.check(ts, n, sender="honest", signed=True)
    for i in range(10_000):  # an insider writes a fresh sender name on every message
        clocks.step(0.02)
        guard.check(clocks.wall, nonce(100 + i), sender=f"sybil{i}", signed=True)
        assert guard.senders() <= 8 and len(guard) <= 64
    assert "honest" not in guard._anchors  # evicted: its anchor was the least recently used
    for ts, n in honest:  # its nonces evicted too (the oldest first): the floor refuses them
        with pytest.raises(AuthError, match="older than the replay window"):
            guard.check(ts, n, sender="honest", signed=True)
    clocks.step(0.1)
    guard.check(
        clocks.wall + 90, nonce(99_999), sender="honest", signed=True
    )  # and it still exchanges


def test_one_sender_s_flood_is_refused_without_raising_the_others_floor(clocks: Clocks) -> None:
    guard = guard_of(clocks, max_nonces=64, sender_nonces=10)
    for i in range(10):
        guard.check(clocks.wall, nonce(i), sender="loud", signed=True)
    with pytest.raises(AuthError, match="a flood"):
        guard.check(clocks.wall, nonce(10), sender="loud", signed=True)
    behind = clocks.wall - 100  # a member 100 s behind is untouched by it
    for i in range(10):
        guard.check(behind + i * 0.01, nonce(1000 + i), sender="quiet", signed=True)
    assert len(guard) == 20


def test_a_clock_that_went_back_is_said_once_and_taken_again_after_idle(clocks: Clocks) -> None:
    guard = guard_of(clocks, idle_s=60)
    guard.check(clocks.wall + 90, nonce(0), sender="c", signed=True)
    said = []
    for i in range(1, 80):  # its clock set right (90 s back): it sends every second
        clocks.step(1)
        try:
            guard.check(clocks.wall, nonce(i), sender="c", signed=True)
        except AuthError as exc:
            said.append(getattr(exc, "said", False))  # True: the HTTP layer logs it at DEBUG
    assert 55 <= len(said) <= 61  # refused until it has been silent here for idle_s
    assert said.count(False) == 1 and not said[0]  # the first one is logged, not the others


def test_a_sender_s_slow_clock_is_followed(clocks: Clocks) -> None:
    guard = guard_of(clocks)
    theirs = clocks.wall
    for i in range(10_000):  # 28 hours, its clock losing 500 ppm (NTP's slew at most)
        clocks.step(10)
        theirs += 10 * (1 - 5e-4)
        guard.check(theirs, nonce(i), sender="slow", signed=True)


def test_answers_anchor_nothing(clocks: Clocks) -> None:
    guard = guard_of(clocks)
    guard.check(clocks.wall + 90, nonce(1), sender="", answer=True)
    assert guard.senders() == 0 and guard.clock_of("") is None


def test_the_plain_check_keeps_its_30_s_window(clocks: Clocks) -> None:
    guard = guard_of(clocks)  # the operator's admin requests
    with pytest.raises(ClockSkew):
        guard.check(clocks.wall + 31, nonce(1))
    assert guard.check(clocks.wall + 29, nonce(2)) is None


def test_envelopes_of_a_member_minutes_off_open_and_are_said_once(
    caplog: pytest.LogCaptureFixture, clocks: Clocks
) -> None:
    ahead = Signer("s", name="c:3", clock=lambda: clocks.wall + 150)
    me = Signer("s", name="a:1", clock=lambda: clocks.wall)
    me.guard.monotonic = lambda: clocks.mono
    caplog.set_level(logging.WARNING)
    for i in range(5):
        clocks.step(1)
        assert me.open("gossip", ahead.seal("gossip", b"x%d" % i, to="a:1")) == b"x%d" % i
    sealed = ahead.seal("gossip", b"y", to="a:1")
    me.open("gossip", sealed)
    with pytest.raises(AuthError, match="replayed"):
        me.open("gossip", sealed)
    said = [r.getMessage() for r in caplog.records if "clock of c:3" in r.getMessage()]
    assert len(said) == 1 and "150 s ahead of that of a:1: tolerated" in said[0], said


def test_an_address_anchors_nothing_so_no_member_can_move_another_s_window(
    clocks: Clocks,
) -> None:
    """On the unsigned routes (gossip, join) the sender is only the address the envelope names,
    which any member holding the secret can write: anchored, one forged message from the
    future would refuse that member's messages here."""
    guard = guard_of(clocks, sender_nonces=10)
    guard.check(clocks.wall + 290, nonce(1), sender="10.0.0.2:7070")  # a forger's
    clocks.step(1)
    assert guard.check(clocks.wall, nonce(2), sender="10.0.0.2:7070") is None  # b's own: taken
    for i in range(20):  # and no quota a forger could spend in its name
        guard.check(clocks.wall, nonce(100 + i), sender="10.0.0.2:7070")
    with pytest.raises(AuthError, match="replayed"):  # rules 1 and 2 still hold
        guard.check(clocks.wall, nonce(2), sender="10.0.0.2:7070")
    with pytest.raises(ClockSkew):
        guard.check(clocks.wall - MAX_OFFSET_S - 1, nonce(3), sender="10.0.0.2:7070")
    assert guard.senders() == 0
    reading = guard.clock_of("10.0.0.2:7070")  # what status shows: the latest word, not trusted
    assert reading is not None and reading.refused


def test_readings_are_bounded(clocks: Clocks) -> None:
    guard = guard_of(clocks, max_senders=4)
    for i in range(100):
        guard.check(clocks.wall + 60, nonce(i), sender=f"10.0.0.{i}:7070")
    assert len(guard._readings) == 4 and guard.clock_of("10.0.0.99:7070") is not None
    assert guard.clock_of("10.0.0.0:7070") is None


def test_this_clock_set_back_re_opens_no_forgotten_nonce(clocks: Clocks) -> None:
    guard = guard_of(clocks)
    recorded = (clocks.wall, nonce(1))
    guard.check(*recorded, sender="b", signed=True)
    clocks.step(MAX_OFFSET_S + guard.max_skew + 1)
    guard.check(clocks.wall, nonce(2), sender="b", signed=True)  # b's nonce 1 is forgotten now
    clocks.jump(-(MAX_OFFSET_S + guard.max_skew))  # this peer's clock set back 330 s
    with pytest.raises(AuthError, match="older than the replay window"):
        guard.check(*recorded, sender="c", signed=True)  # a first contact: only the floor
