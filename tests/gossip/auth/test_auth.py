"""HMAC envelopes: what passes, everything that must not, and the transport/handler wrappers.

Time comes from a fake clock, so the skew and window tests are exact and immune to CPU load.
"""

from __future__ import annotations

import hashlib
import hmac

import blake3
import numpy as np
import pytest
from swarmnode.gossip.auth import signer as auth
from swarmnode.gossip.auth.replay import MAX_OFFSET_S
from swarmnode.gossip.auth.signer import ReplayGuard, Signer, nonce_of
from swarmnode.gossip.auth.transport import AuthTransport, auth_handlers
from swarmnode.gossip.errors import (
    AuthError,
    RemoteError,
    TransportError,
    UnauthenticatedRequest,
    UnauthenticatedResponse,
)
from swarmnode.gossip.link.inmemory import InMemoryNetwork
from swarmnode.gossip.link.transport import Arrival
from swarmnode.kernels.errors import SwarmnodeError

SECRET = "correct horse battery staple"


class FakeClock:
    def __init__(self, now: float = 1_700_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def sender(clock: FakeClock) -> Signer:
    return Signer(SECRET, clock=clock)


@pytest.fixture
def receiver(clock: FakeClock) -> Signer:
    return Signer(SECRET, clock=clock)


# --- the envelope ------------------------------------------------------------------------------


def test_round_trip_small_body_comes_back_as_bytes(sender: Signer, receiver: Signer) -> None:
    sealed = sender.seal("gossip", b"hello")
    assert len(sealed) == auth.HEADER_BYTES + 5 + auth.TRAILER_BYTES
    body = receiver.open("gossip", sealed)
    assert body == b"hello" and isinstance(body, bytes)


def test_round_trip_large_body_is_a_zero_copy_view(sender: Signer, receiver: Signer) -> None:
    payload = np.random.default_rng(0).integers(0, 256, auth.INLINE_BYTES + 1000, dtype=np.uint8)
    sealed = sender.seal("params", memoryview(payload))
    body = receiver.open("params", sealed)
    assert isinstance(body, memoryview)
    assert bytes(body) == payload.tobytes()
    assert np.shares_memory(np.frombuffer(body, np.uint8), np.frombuffer(sealed, np.uint8))


def test_empty_body_round_trips(sender: Signer, receiver: Signer) -> None:
    assert receiver.open("leave", sender.seal("leave", b"")) == b""


def test_head_and_trailer_tags_are_hmac_sha256_over_the_v5_layout(clock) -> None:
    """The bytes of a v5 envelope as docs/exchange.md and signer.py describe them."""
    sealed = bytes(Signer(SECRET, name="a:1", clock=clock).seal("gossip", b"body", to="b:2"))
    assert sealed[:4] == auth.MAGIC == b"SNA5"
    nonce = sealed[12:28]
    assert sealed[28:37] == b"\x03a:1\x03b:2\x00"
    assert sealed[37:45] == (4).to_bytes(8, "big") and sealed[45] == auth.DIGEST_BLAKE3
    head_tag, head_sig = sealed[46:78], sealed[78:142]
    assert auth.header_length(sealed) == 142 and head_sig == bytes(64)  # no member signs gossip
    assert sealed[142:146] == b"body"
    d, tag, sig = sealed[146:178], sealed[178:210], sealed[210:]
    assert len(sealed) == 146 + auth.TRAILER_BYTES and sig == bytes(64)
    route = len(b"gossip").to_bytes(2, "big") + b"gossip" + b"\0"
    h = auth.HEAD_DOMAIN + route + sealed[4:46]
    assert hmac.compare_digest(head_tag, hmac.new(SECRET.encode(), h, hashlib.sha256).digest())
    covered = sealed[4:146]  # the whole head (its tag and signature too), then the body
    assert d == blake3.blake3(covered).digest()
    t = auth.DOMAIN + route + len(covered).to_bytes(8, "big") + d
    assert hmac.compare_digest(tag, hmac.new(SECRET.encode(), t, hashlib.sha256).digest())
    assert nonce == nonce_of(sealed)


def test_a_request_opens_only_at_its_receiver(clock: FakeClock) -> None:
    """A capture replayed to another peer (each has its own nonce cache) is refused there."""
    a = Signer(SECRET, name="10.0.0.1:7070", clock=clock)
    b = Signer(SECRET, name="10.0.0.2:7070", clock=clock)
    c = Signer(SECRET, name="10.0.0.3:7070", clock=clock)
    sealed = a.seal("gossip", b"x", to="10.0.0.2:7070")
    with pytest.raises(AuthError, match=r"addressed to '10\.0\.0\.2:7070'"):
        c.open("gossip", sealed)
    assert b.open("gossip", sealed) == b"x"
    with pytest.raises(AuthError, match="addressed"):  # an unnamed signer opens nothing named
        Signer(SECRET, clock=clock).open("gossip", a.seal("gossip", b"x", to="10.0.0.2:7070"))


def test_the_arrival_address_is_a_name_too(clock: FakeClock) -> None:
    """A seed dialled by the address it listens on, not the one it advertises, still opens."""
    a = Signer(SECRET, name="a:1", clock=clock)
    b = Signer(SECRET, name="public.example:7070", clock=clock)
    here = "127.0.0.1:7070"  # where the request arrived (`Arrival.local`)
    opened = b.open_request("gossip", a.seal("gossip", b"1", to="127.0.0.1:7070"), arrived=here)
    assert opened.body == b"1"
    opened = b.open_request("gossip", a.seal("gossip", b"2", to="localhost:7070"), arrived=here)
    assert opened.body == b"2"
    with pytest.raises(AuthError, match="addressed"):
        b.open_request("gossip", a.seal("gossip", b"3", to="127.0.0.1:7071"), arrived=here)
    with pytest.raises(AuthError, match="addressed"):  # nor without knowing where it arrived
        b.open("gossip", a.seal("gossip", b"4", to="127.0.0.1:7070"))


def test_the_names_cannot_be_swapped(clock: FakeClock) -> None:
    a = Signer(SECRET, name="a:1", clock=clock)
    b = Signer(SECRET, name="b:22", clock=clock)
    sealed = bytes(a.seal("gossip", b"x", to="c:33"))
    # readdressed to b: same length, other receiver; the tag does not follow
    forged = sealed.replace(b"\x04c:33", b"\x04b:22")
    with pytest.raises(AuthError, match="authentication code"):
        b.open("gossip", forged)


def test_nonces_are_fresh_per_message(sender: Signer) -> None:
    nonces = {nonce_of(sender.seal("gossip", b"x")) for _ in range(100)}
    assert len(nonces) == 100


def test_empty_secret_is_refused() -> None:
    with pytest.raises(AuthError, match="empty"):
        Signer("")


def test_auth_error_is_a_swarmnode_error_with_status_401() -> None:
    assert issubclass(AuthError, SwarmnodeError)
    assert AuthError.status == 401
    assert issubclass(UnauthenticatedResponse, TransportError)
    assert UnauthenticatedRequest("x").status == 401 and isinstance(
        UnauthenticatedRequest("x"), RemoteError
    )


# --- what must be refused ----------------------------------------------------------------------


def _tamper(data: bytes | memoryview, pos: int) -> bytes:
    out = bytearray(data)
    out[pos] ^= 0x01
    return bytes(out)


def test_unsigned_message_is_refused(receiver: Signer) -> None:
    with pytest.raises(AuthError, match="not authenticated"):
        receiver.open("gossip", b"\x82\xa7version\x01\xa4type\xa6gossip" + bytes(128))


def test_forged_tag_is_refused(sender: Signer, receiver: Signer) -> None:
    sealed = bytes(sender.seal("gossip", b"x"))
    forged = sealed[:4] + bytes(32) + sealed[36:]
    with pytest.raises(AuthError, match="authentication code"):
        receiver.open("gossip", forged)


def test_wrong_secret_is_refused(clock: FakeClock, receiver: Signer) -> None:
    other = Signer("another secret", clock=clock)
    with pytest.raises(AuthError, match="authentication code"):
        receiver.open("gossip", other.seal("gossip", b"x"))


def test_replay_is_refused(sender: Signer, receiver: Signer) -> None:
    sealed = sender.seal("gossip", b"x")
    receiver.open("gossip", sealed)
    with pytest.raises(AuthError, match="replayed"):
        receiver.open("gossip", sealed)


@pytest.mark.parametrize("where", ["body", "timestamp", "nonce", "magic", "signature"])
def test_replay_with_any_changed_byte_fails_the_tag(
    sender: Signer, receiver: Signer, where: str
) -> None:
    sealed = sender.seal("gossip", b"the body")
    pos = {"body": 130, "timestamp": 105, "nonce": 115, "magic": 0, "signature": 62}[where]
    with pytest.raises(AuthError):
        receiver.open("gossip", _tamper(sealed, pos))
    receiver.open("gossip", sealed)  # the failed attempts did not burn the nonce


def test_message_for_another_route_is_refused(sender: Signer, receiver: Signer) -> None:
    with pytest.raises(AuthError, match="authentication code"):
        receiver.open("pushpull", sender.seal("gossip", b"x"))


def test_every_truncation_is_refused(sender: Signer, receiver: Signer) -> None:
    sealed = bytes(sender.seal("gossip", b"some body"))
    for cut in range(len(sealed)):
        with pytest.raises(AuthError):
            receiver.open("gossip", sealed[:cut])


def test_oversized_messages_are_refused_on_both_sides(clock: FakeClock) -> None:
    small = Signer(SECRET, clock=clock, max_body_bytes=100)
    with pytest.raises(AuthError, match="cap"):
        small.seal("params", bytes(101))
    big = Signer(SECRET, clock=clock).seal("params", bytes(101))
    with pytest.raises(AuthError, match="cap"):
        small.open("params", big)


def test_stale_and_future_timestamps_are_refused(
    clock: FakeClock, sender: Signer, receiver: Signer
) -> None:
    # beyond what is tolerated of a sender's clock (gossip/auth/replay.py; within it: test_replay.py)
    old = sender.seal("gossip", b"x")
    clock.now += MAX_OFFSET_S + 1
    with pytest.raises(AuthError, match="off this peer's clock"):
        receiver.open("gossip", old)
    early = Signer(SECRET, clock=lambda: clock.now + MAX_OFFSET_S + 1).seal("gossip", b"x")
    with pytest.raises(AuthError, match="off this peer's clock"):
        receiver.open("gossip", early)


def test_response_is_bound_to_its_request(sender: Signer, receiver: Signer) -> None:
    request = sender.seal("gossip", b"req")
    _, nonce = receiver.unseal("gossip", request)
    answer = receiver.seal("gossip", b"ans", reply_to=nonce)
    other_request = sender.seal("gossip", b"req2")
    with pytest.raises(AuthError):  # an answer to another request
        sender.open("gossip", answer, reply_to=nonce_of(other_request))
    with pytest.raises(AuthError):  # a request reflected back as an answer
        sender.open("gossip", request, reply_to=nonce_of(request))
    assert sender.open("gossip", answer, reply_to=nonce_of(request)) == b"ans"


# --- the replay guard --------------------------------------------------------------------------


def test_guard_forgets_nonces_once_the_skew_refuses_them_anyway(clock: FakeClock) -> None:
    guard = ReplayGuard(max_skew=30, clock=clock)
    guard.check(clock.now, b"a" * 16)
    guard.check(clock.now, b"b" * 16)
    assert len(guard) == 2
    clock.now += 31
    guard.check(clock.now, b"c" * 16)
    assert len(guard) == 1


def test_guard_memory_is_bounded_and_eviction_never_reopens_a_replay(clock: FakeClock) -> None:
    guard = ReplayGuard(max_skew=30, max_nonces=10, clock=clock)
    for i in range(50):
        guard.check(clock.now - 20 + i * 0.1, i.to_bytes(16, "big"))
        assert len(guard) <= 10
    with pytest.raises(AuthError):  # evicted, but below the floor: still refused
        guard.check(clock.now - 20, (0).to_bytes(16, "big"))
    with pytest.raises(AuthError, match="replayed"):  # still in the window
        guard.check(clock.now - 20 + 4.9, (49).to_bytes(16, "big"))
    guard.check(clock.now, b"z" * 16)  # fresh messages still pass


def test_guard_rejects_bad_settings() -> None:
    with pytest.raises(ValueError):
        ReplayGuard(max_skew=0)


# --- server side: auth_handlers ------------------------------------------------------------------


class Spy:
    def __init__(self) -> None:
        self.bodies: list[bytes] = []

    async def __call__(self, req: Arrival) -> bytes:
        body = req.body
        self.bodies.append(bytes(body))
        return b"answer:" + bytes(body)


async def test_handler_sees_the_body_and_its_answer_is_sealed(
    sender: Signer, receiver: Signer
) -> None:
    spy = Spy()
    wrapped = auth_handlers({"gossip": spy}, receiver)["gossip"]
    request = sender.seal("gossip", b"hi")
    answer = await wrapped(Arrival(request))
    assert spy.bodies == [b"hi"]
    assert sender.open("gossip", answer, reply_to=nonce_of(request)) == b"answer:hi"


def _bad_requests(sender: Signer, clock: FakeClock) -> dict[str, bytes]:
    good = bytes(sender.seal("gossip", b"payload"))
    return {
        "unsigned": b"payload",
        "forged": good[:4] + bytes(32) + good[36:],
        "wrong-secret": bytes(Signer("nope", clock=clock).seal("gossip", b"payload")),
        "changed-body": good[:-1] + b"X",
        "truncated": good[:40],
        "other-route": bytes(sender.seal("params", b"payload")),
        "empty": b"",
    }


@pytest.mark.parametrize(
    "kind",
    ["unsigned", "forged", "wrong-secret", "changed-body", "truncated", "other-route", "empty"],
)
async def test_bad_requests_get_401_and_never_reach_the_handler(
    sender: Signer, receiver: Signer, clock: FakeClock, kind: str
) -> None:
    spy = Spy()
    wrapped = auth_handlers({"gossip": spy}, receiver)["gossip"]
    with pytest.raises(UnauthenticatedRequest) as info:
        await wrapped(Arrival(_bad_requests(sender, clock)[kind]))
    assert info.value.status == 401 and isinstance(info.value, AuthError)
    assert spy.bodies == []


async def test_replayed_and_oversized_requests_never_reach_the_handler(
    sender: Signer, clock: FakeClock
) -> None:
    receiver = Signer(SECRET, clock=clock, max_body_bytes=1000)
    spy = Spy()
    wrapped = auth_handlers({"gossip": spy}, receiver)["gossip"]
    request = sender.seal("gossip", b"once")
    await wrapped(Arrival(request))
    with pytest.raises(UnauthenticatedRequest, match="replayed"):
        await wrapped(Arrival(request))
    with pytest.raises(UnauthenticatedRequest, match="cap"):
        await wrapped(Arrival(sender.seal("gossip", bytes(1001))))
    assert spy.bodies == [b"once"]


# --- client side and both together over the in-memory network -------------------------------


async def test_auth_transport_and_handlers_talk_over_the_network() -> None:
    net = InMemoryNetwork()
    server_signer, client_signer = Signer(SECRET), Signer(SECRET)
    spy = Spy()
    net.register("b:1", auth_handlers({"gossip": spy}, server_signer))
    client = AuthTransport(net.transport("a:1"), client_signer)
    assert await client.request("b:1", "gossip", b"ping", timeout=5) == b"answer:ping"
    big = bytes(auth.INLINE_BYTES + 10)  # sealed and opened in worker threads
    assert await client.request("b:1", "gossip", big, timeout=5) == b"answer:" + big
    assert spy.bodies == [b"ping", big]
    await client.close()


async def test_peer_with_another_secret_is_refused_both_ways() -> None:
    net = InMemoryNetwork()
    spy = Spy()
    net.register("b:1", auth_handlers({"gossip": spy}, Signer("server secret")))
    client = AuthTransport(net.transport("a:1"), Signer("client secret"))
    with pytest.raises(RemoteError) as info:
        await client.request("b:1", "gossip", b"ping", timeout=5)
    assert info.value.status == 401
    assert spy.bodies == []
    # An unauthenticating server: its plain answer is refused by the client.
    net.register("c:1", {"gossip": spy})
    with pytest.raises(UnauthenticatedResponse):
        await client.request("c:1", "gossip", b"ping", timeout=5)


class ReplayingInner:
    """A man in the middle: answers with the first response it ever saw, or mangles answers."""

    def __init__(self, inner: object, mode: str) -> None:
        self.inner = inner
        self.mode = mode
        self.first: bytes | None = None

    async def request(self, addr: str, route: str, body: bytes, *, timeout: float) -> bytes:
        answer = bytes(await self.inner.request(addr, route, body, timeout=timeout))
        if self.mode == "flip":
            return _tamper(answer, len(answer) - 1)
        if self.first is None:
            self.first = answer
        return self.first

    async def close(self) -> None:
        pass


@pytest.mark.parametrize("mode", ["replay", "flip"])
async def test_replayed_or_altered_responses_are_refused(mode: str) -> None:
    net = InMemoryNetwork()
    net.register("b:1", auth_handlers({"gossip": Spy()}, Signer(SECRET)))
    client = AuthTransport(ReplayingInner(net.transport("a:1"), mode), Signer(SECRET))
    if mode == "replay":
        assert await client.request("b:1", "gossip", b"one", timeout=5) == b"answer:one"
    with pytest.raises(UnauthenticatedResponse):
        await client.request("b:1", "gossip", b"two", timeout=5)


def test_one_skewed_peer_s_request_and_answer_do_not_make_a_peer_blame_its_own_clock(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # An answer names no sender: counted as a second witness, one peer 90 s ahead (its request,
    # then its answer to a request of ours) read as "two members agree", and this peer said its
    # own clock was off
    import logging
    import time

    from swarmnode.gossip.auth.replay import ClockSkew

    ahead = Signer(SECRET, name="c:3", clock=lambda: time.time() + MAX_OFFSET_S + 90)
    me = Signer(SECRET, name="a:1", clock=time.time)
    caplog.set_level(logging.DEBUG)
    with pytest.raises(ClockSkew):
        me.open("gossip", ahead.seal("gossip", b"x", to="a:1"))
    nonce = b"\x01" * 16
    with pytest.raises(ClockSkew):
        me.open("gossip", ahead.seal("gossip", b"y", reply_to=nonce), reply_to=nonce)
    assert not [r for r in caplog.records if "most likely off" in r.getMessage()]
    assert list(me.skews.said) == ["c:3"]  # said once: the request's named sender
