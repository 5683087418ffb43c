"""The swarm secret end to end: peers that share it form a swarm and exchange; nothing else gets in.

In-process `Node`s on 127.0.0.1 (one `swarmnode start` process for the exit code). The attacks
are real HTTP requests built with `swarmnode.gossip.auth.signer.Signer`, the same envelope the peers use: unsigned,
forged tag, wrong secret, sealed for another route, stale, truncated, a captured request replayed
verbatim and replayed with another body. Each must be answered 401 with one log line and leave
the model, the membership and the admin settings exactly as they were; a signed but malformed
payload is answered 400 and never reaches the model either.
"""

from __future__ import annotations

import asyncio
import logging
import math
import sys
import time
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import numpy as np
import pytest
from swarmnode.fault.hostile.insider import admit
from swarmnode.gossip.auth.signer import (
    HEADER_BYTES,
    SIGNED_ROUTES,
    TRAILER_BYTES,
    Signer,
    header_length,
    nonce_of,
)
from swarmnode.gossip.wire import frames as wire
from swarmnode.gossip.wire.control import decode_control, encode_control
from swarmnode.kernels.errors import SwarmnodeError
from swarmnode.node.peer.node import Node
from swarmnode.node.peer.page import other_members
from swarmnode.node.peer.status_routes import status_json
from swarmnode.node.settings import PeerConfig

from tests.integration.inprocess import peer_config as in_process_config
from tests.integration.member_client import MemberClient
from tests.integration.peers import ENV
from tests.signed import key_of, signed_entry
from tests.waiting import eventually

pytestmark = pytest.mark.timeout(90)

SECRET = "s"
CLIENT = MemberClient(SECRET)  # a member of the swarm (admitted to the frozen peer)


def peer_config(**kw: Any) -> PeerConfig:
    return in_process_config(**{"secret": SECRET, **kw})


@pytest.fixture
async def nodes() -> AsyncIterator[list[Node]]:
    started: list[Node] = []
    yield started
    for node in reversed(started):
        await node.close()


def sees_all_alive(node: Node, others: list[Node]) -> bool:
    states = {m.peer_id: str(m.state) for m in node.membership.members()}
    return all(states.get(o.peer_id) == "alive" for o in others)


# --- a swarm with a secret -----------------------------------------------------------------


async def test_peers_with_the_secret_join_and_exchange(nodes, caplog):
    caplog.set_level(logging.INFO)
    a = await Node.create(peer_config())
    nodes.append(a)
    b = await Node.create(peer_config(join=[a.addr]))
    nodes.append(b)
    c = await Node.create(peer_config(join=[b.addr]))  # any peer is an entry point
    nodes.append(c)
    swarm = [a, b, c]
    for n in swarm:
        others = [o for o in swarm if o is not n]
        await eventually(lambda n=n, o=others: sees_all_alive(n, o), 20, f"{n.peer_id} to see all")
    for n in swarm:  # every peer both initiates and serves signed exchanges
        await eventually(
            lambda n=n: n.exchanger.rounds_applied >= 1 and n.exchanger.served >= 1,
            30,
            f"{n.peer_id} to exchange",
        )
        assert np.isfinite(n.params_host()).all()
    assert sum(n.exchanger.rejected for n in swarm) == 0

    for secret in ("wrong", None):  # a wrong secret, and none at all, cannot get in
        caplog.clear()
        with pytest.raises(SwarmnodeError, match="could not join"):
            await Node.create(peer_config(secret=secret, join=[a.addr], join_timeout=1.5))
        assert join_refused_401(caplog), f"secret {secret!r}: the seed never answered 401"
    for n in swarm:
        assert len(n.membership.members()) == 2, "an outsider made it into the table"


def join_refused_401(caplog: pytest.LogCaptureFixture) -> bool:
    # The joiner's error names the last attempt, which may be a deadline cut short; the seed's
    # own log says why it refused.
    return any(
        "rejected /v1/join" in r.getMessage() and " 401 " in r.getMessage() for r in caplog.records
    )


@pytest.mark.slow
async def test_a_process_with_the_wrong_secret_exits_2_with_one_clear_line(nodes, caplog):
    caplog.set_level(logging.INFO)
    seed = await Node.create(peer_config(slowdown=1.0, steps=1))  # steps=1: idle after one step
    nodes.append(seed)
    cmd = [sys.executable, "-m", "swarmnode", "start", "--listen", "127.0.0.1:0",
           "--model", "mlp:8", "--steps", "0", "--secret", "wrong", "--join", seed.addr,
           "--join-timeout", "2"]  # fmt: skip
    proc = await asyncio.create_subprocess_exec(
        *cmd, env=ENV, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
    )
    out, err = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode == 2, (out, err)
    lines = err.decode().strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("swarmnode start: error: could not join"), lines[0]
    assert join_refused_401(caplog)
    assert "Traceback" not in out.decode()
    assert seed.membership.members() == []


@pytest.mark.slow
@pytest.mark.parametrize(
    ("seed_secret", "joiner_secret", "line"),
    [
        (None, SECRET, "this peer has --secret and the seed has none"),
        (SECRET, None, "this swarm is closed (--secret) and this peer has none"),
    ],
)
async def test_a_secret_on_one_side_only_fails_at_once_naming_both_sides(
    nodes, caplog, seed_secret, joiner_secret, line
):
    """Issue 34: a joiner with a secret into an open seed waited out the whole join timeout
    (30 s) on `400: malformed msgpack: ExtraData`, and the seed logged a WARNING per retry."""
    caplog.set_level(logging.INFO)
    seed = await Node.create(peer_config(secret=seed_secret, slowdown=1.0, steps=1))
    nodes.append(seed)
    cmd = [sys.executable, "-m", "swarmnode", "start", "--listen", "127.0.0.1:0",
           "--model", "mlp:8", "--steps", "0", "--join", seed.addr, "--join-timeout", "30",
           *(["--secret", joiner_secret] if joiner_secret else [])]  # fmt: skip
    started = time.monotonic()
    proc = await asyncio.create_subprocess_exec(
        *cmd, env=ENV, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
    )
    out, err = await asyncio.wait_for(proc.communicate(), 60)
    took = time.monotonic() - started
    assert proc.returncode == 2, (out, err)
    assert took < 15, f"{took:.1f} s: it waited for the join timeout"  # imports take seconds
    lines = [x for x in err.decode().splitlines() if "swarmnode start: error" in x]
    assert len(lines) == 1 and line in lines[0], err
    refusals = [r for r in caplog.records if "rejected /v1/join" in r.getMessage()]
    assert len(refusals) == 1, [r.getMessage() for r in refusals]
    assert refusals[0].levelno == logging.INFO  # a stranger's knock: one line, no warning


# --- attacks on a frozen peer --------------------------------------------------------------


@pytest.fixture
async def frozen(nodes) -> Node:
    node = await Node.create(peer_config(slowdown=1.0))
    nodes.append(node)
    # Training stopped: the parameters change only if a request changes them.
    assert await asyncio.to_thread(node.worker.stop, 30.0)
    admit(node, CLIENT)  # the pushes here test the envelope, not who may push
    return node


def entry(variant: int) -> list[object]:
    return signed_entry(key_of(1000 + variant))


def request_body(route: str, size: int, variant: int) -> bytes:
    """A well-formed body for `route`; variants differ, so a changed body is detectable."""
    if route == "params":
        return encode_control("pull", sender=CLIENT.peer_id, variant=variant)
    if route == "pushpull":
        vec = np.full(size, variant, np.float32)
        return bytes(wire.encode_params(vec, sender=CLIENT.peer_id, step=1))
    if route == "gossip":
        return encode_control("gossip", sender="t", members=[entry(variant)])
    return encode_control("slowdown", factor=float(variant + 1))


def malformed_body(route: str, size: int) -> bytes:
    if route == "pushpull":
        bad = np.zeros(size, np.float32)
        bad[1] = np.nan
        return bytes(wire.encode_params(bad, sender=CLIENT.peer_id, step=1))
    if route == "admin/slowdown":
        return encode_control("slowdown", factor=math.nan)
    return b"\xc1 not msgpack"


def state_of(node: Node) -> tuple[Any, ...]:
    ids = sorted(m.peer_id for m in node.membership.members())
    return (node.params_host().tobytes(), tuple(ids), node.worker.pacer.slowdown)


async def send(http: aiohttp.ClientSession, node: Node, route: str, body: bytes) -> tuple:
    async with http.post(f"http://{node.addr}/v1/{route}", data=body) as resp:
        answer = resp.status, await resp.read()
    await node.exchanger.settle()  # an accepted pushpull's mix starts as the answer leaves
    await node.store.settled()  # and lands after it
    return answer


def member_signer(secret: str, **kw: Any) -> Signer:
    """A signer as a member peer of the swarm has: the secret and the member's key."""
    return Signer(secret, key=CLIENT.key, signed_routes=SIGNED_ROUTES, **kw)


def forged(sealed: bytes) -> bytes:
    tag_byte = len(sealed) - TRAILER_BYTES + 31  # the last byte of the tag (in the trailer)
    return sealed[:tag_byte] + bytes([sealed[tag_byte] ^ 1]) + sealed[tag_byte + 1 :]


@pytest.mark.parametrize("route", ["params", "pushpull", "gossip"])
async def test_unsigned_forged_and_replayed_requests_are_refused(route, frozen, caplog):
    caplog.set_level(logging.INFO)
    node, size = frozen, frozen.store.size
    signer = member_signer(SECRET, name="127.0.0.1:9")  # a member of the swarm, to `node`
    to = node.addr
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=30)) as http:
        # A genuine request works, and its answer is sealed for it.
        captured = bytes(signer.seal(route, request_body(route, size, 1), to=to))
        status, answer = await send(http, node, route, captured)
        assert status == 200, answer
        check_answer(route, signer.open(route, answer, reply_to=nonce_of(captured)), size)
        other = "join"  # not among the routes under test
        fresh = request_body(route, size, 7)
        head = header_length(captured)
        attacks = {
            "unsigned": fresh,
            "forged tag": forged(bytes(signer.seal(route, fresh, to=to))),
            "wrong secret": bytes(member_signer("not-" + SECRET).seal(route, fresh, to=to)),
            "sealed for another route": bytes(signer.seal(other, fresh, to=to)),
            # what a capture on its way to another peer is: issue 10's cross-peer replay
            "sealed for another peer": bytes(signer.seal(route, fresh, to="127.0.0.1:1")),
            "sealed for nobody": bytes(signer.seal(route, fresh)),
            # beyond any clock tolerated (gossip/auth/replay.py), whoever sent it
            "sealed ten minutes ago": bytes(
                member_signer(SECRET, clock=lambda: time.time() - 600).seal(route, fresh, to=to)
            ),
            "truncated envelope": bytes(signer.seal(route, fresh, to=to))[: HEADER_BYTES - 5],
            "replayed verbatim": captured,
            "replayed with another body": captured[:head] + fresh + captured[-TRAILER_BYTES:],
        }
        if route in SIGNED_ROUTES:
            # two minutes older than its signer's latest, by the signer's own clock: held back
            # (a clock minutes off is tolerated, a request from the signer's past is not). A
            # gossip digest names only an address, which anchors nothing: within 300 s it is
            # taken once (its records are signed by their owners, and merged by incarnation
            # and heartbeat: an old one changes nothing)
            attacks["sealed two minutes ago"] = bytes(
                member_signer(SECRET, name="127.0.0.1:9", clock=lambda: time.time() - 120).seal(
                    route, fresh, to=to
                )
            )
        for what, body in attacks.items():
            before = state_of(node)
            caplog.clear()
            status, text = await send(http, node, route, body)
            assert status == 401, f"{what}: answered {status} {text[:200]!r}"
            lines = [r.getMessage() for r in caplog.records if f"/v1/{route}" in r.getMessage()]
            assert len(lines) == 1, f"{what}: expected one log line, got {lines}"
            assert not [r for r in caplog.records if r.levelno >= logging.ERROR], what
            assert state_of(node) == before, f"{what} changed the peer's state"

        # Signed by someone holding the secret, but malformed: 400, and the model is untouched.
        before = state_of(node)
        status, _ = await send(
            http, node, route, bytes(signer.seal(route, malformed_body(route, size), to=to))
        )
        assert status == 400
        assert state_of(node) == before
        assert np.isfinite(node.params_host()).all()

        # The peer still serves genuine requests.
        again = bytes(signer.seal(route, request_body(route, size, 2), to=to))
        status, answer = await send(http, node, route, again)
        assert status == 200
        check_answer(route, signer.open(route, answer, reply_to=nonce_of(again)), size)


def check_answer(route: str, body: bytes | memoryview, size: int) -> None:
    """An opened (authenticated) answer is what the route promises."""
    if route in ("params", "pushpull"):
        _, vec = wire.decode_params(body, expected_size=size)
        wire.validate_params(vec, size)
    else:
        assert decode_control(body)["type"] in ("gossip-ack", "ok")


# --- clocks off by more than the envelope's window -------------------------------------------


def _clock_off(node: Node, by: float) -> None:
    """`node`'s envelopes stamped, and others' judged, `by` seconds off the real clock."""
    clock = lambda: time.time() + by  # noqa: E731
    node.signer.clock = node.signer.guard.clock = clock


async def test_a_joiner_whose_clock_is_off_is_told_so_not_to_check_the_secret(
    nodes, caplog, monkeypatch
):
    """Issue 34: a joiner 45 s off failed with 'check the swarm --secret'. Now 45 s is
    tolerated (gossip/auth/replay.py); beyond the tolerance (300 s) the joiner is told why."""
    seed = await Node.create(peer_config(slowdown=1.0, steps=1))
    nodes.append(seed)
    real = Signer

    def skewed(*args: Any, **kw: Any) -> Signer:
        return real(*args, **{**kw, "clock": lambda: time.time() + 400})

    monkeypatch.setattr("swarmnode.node.peer.node.Signer", skewed)
    with pytest.raises(SwarmnodeError) as info:
        await Node.create(peer_config(join=[seed.addr], join_timeout=20))
    said = str(info.value)
    assert "refused this peer's clock" in said and "400 s ahead of" in said, said
    assert "secret" not in said.split("(")[0]


async def test_a_member_whose_clock_jumps_90_s_keeps_exchanging_and_is_said_once(nodes, caplog):
    """Issue 34, item 15: a peer whose clock jumped after joining stayed listed alive while it
    dropped out of the exchange (188 rounds started, 0 applied). 90 s is tolerated now
    (gossip/auth/replay.py): it goes on applying rounds, and the skew is said once, on both
    sides, with the measured offset; the others' status shows it."""
    caplog.set_level(logging.INFO)
    for _ in range(3):
        join = [nodes[0].addr] if nodes else []
        nodes.append(await Node.create(peer_config(join=join, slowdown=20.0)))
    c = nodes[2]  # its clock jumps 90 s ahead
    for n in nodes:
        await eventually(lambda n=n: len(n.membership.live_peers()) == 2, 20, "all alive")
    caplog.clear()
    _clock_off(c, 90)

    def said(text: str) -> list[str]:
        return [r.getMessage() for r in caplog.records if text in r.getMessage()]

    await eventually(lambda: said("most likely off"), 20, "c to say its clock is off")
    # rounds go on and are applied, every peer's, c's too
    applied = [n.exchanger.rounds_applied for n in nodes]
    await eventually(
        lambda: all(
            n.exchanger.rounds_applied >= r + 5 for n, r in zip(nodes, applied, strict=True)
        ),
        30,
        "five more rounds applied on every peer",
    )
    assert len(said("most likely off")) == 1
    mine = said(f"the clock of {c.addr} is 90 s ahead of that of 127.0.0.1:")
    assert mine and all("tolerated" in m for m in mine), mine
    warned = [
        r
        for r in caplog.records
        if r.levelno == logging.WARNING and f"clock of {c.addr}" in r.getMessage()
    ]
    assert 1 <= len(mine) and len(warned) <= 2  # a and b, once each: not one per request
    for n in nodes[:2]:
        row = next(m for m in status_json(n)["members"] if m["peer_id"] == c.peer_id)
        assert row["clock"] == "tolerated" and 85 <= row["clock_s"] <= 95, row
        assert row["state"] == "alive"


@pytest.mark.parametrize("secret", [SECRET, None])
async def test_a_member_whose_clock_is_beyond_the_tolerance_is_shown_refused(nodes, secret):
    """400 s off: nothing of it is taken. Without a secret its gossip travels bare and keeps
    it listed alive while its exchanges are refused; the status says so ("refused")."""
    for _ in range(2):
        join = [nodes[0].addr] if nodes else []
        nodes.append(await Node.create(peer_config(join=join, slowdown=20.0, secret=secret)))
    a, c = nodes
    await eventually(lambda: len(a.membership.live_peers()) == 1, 20, "c alive")
    _clock_off(c, 400)

    def row() -> dict[str, Any]:
        return next(m for m in status_json(a)["members"] if m["peer_id"] == c.peer_id)

    await eventually(lambda: row()["clock"] == "refused", 30, "a to show c's clock refused")
    assert 395 <= row()["clock_s"] <= 405, row()
    page = next(m for m in other_members(a) if m["peer_id"] == c.peer_id)  # the page's rows
    assert page["clock"] == "refused", page
    _clock_off(c, 0)  # set right: taken again, and shown so
    applied = a.exchanger.rounds_applied
    await eventually(lambda: row()["clock"] is None, 30, "a to take c again")
    await eventually(lambda: a.exchanger.rounds_applied > applied, 30, "a round applied")
