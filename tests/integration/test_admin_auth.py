"""The admin routes against an attacker (issue 10): in-process peers on 127.0.0.1, real HTTP.

Before: `admin/fault drop=1`, `admin/byzantine huge`, `admin/slowdown 1000` from any local
process were obeyed (loopback was trusted), and an operator's signed command captured on its way
to one peer replayed to every other (12/12 accepted: every peer turned byzantine). Now the
routes are 404 unless enabled, and enabled ones obey only the operator's key, addressed to them.
"""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncIterator

import aiohttp
import pytest
from swarmnode.fault.inject.transport import FaultyTransport
from swarmnode.gossip.auth.operator import OperatorKey
from swarmnode.gossip.auth.signer import Signer
from swarmnode.gossip.wire.control import encode_control
from swarmnode.node.net.transport import HttpTransport
from swarmnode.node.peer.node import Node
from swarmnode.node.peer.status_routes import fault_spec
from swarmnode.node.train.errors import ConfigError

from tests.integration.inprocess import peer_config
from tests.integration.peers import OPERATOR, operator_pub
from tests.waiting import eventually

pytestmark = pytest.mark.timeout(90)

SABOTAGE = [
    ("admin/fault", encode_control("fault", spec="drop=1")),
    ("admin/byzantine", encode_control("byzantine", kind="huge")),
    ("admin/slowdown", encode_control("slowdown", factor=1000.0)),
]


@pytest.fixture
async def nodes() -> AsyncIterator[list[Node]]:
    started: list[Node] = []
    yield started
    for node in reversed(started):
        await node.close()


@pytest.fixture
async def http() -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=30)) as session:
        yield session


async def post(http: aiohttp.ClientSession, addr: str, route: str, body: bytes) -> int:
    async with http.post(f"http://{addr}/v1/{route}", data=body) as resp:
        await resp.read()
        return resp.status


def flip_last(data: bytes) -> bytes:
    return data[:-1] + bytes([data[-1] ^ 1])


def sabotaged(node: Node) -> bool:
    return (
        fault_spec(node) not in ("", "none")
        or node.byzantine.kind is not None
        or node.worker.pacer.slowdown != 4.0
    )


async def test_admin_routes_are_404_unless_enabled(nodes, http):
    node = await Node.create(peer_config())
    nodes.append(node)
    for route, body in SABOTAGE:
        assert await post(http, node.addr, route, body) == 404
        signed = OPERATOR.sign(route, body, to=node.addr)  # even signed: nothing is there
        assert await post(http, node.addr, route, signed) == 404
    assert not sabotaged(node)


def under_auth(node: Node) -> object:
    """The transport the peer's signed requests go out through (below links and auth)."""
    return node.links.inner.inner


async def test_the_fault_layer_is_on_the_path_only_with_fault_or_admin(nodes, http, tmp_path):
    """A peer sends straight through HTTP unless faults can be asked of it: a `--fault` that
    injects something, or the admin routes; then through `FaultyTransport`, which the
    operator's `admin/fault` drives."""
    plain = await Node.create(peer_config())
    nodes.append(plain)
    nodes.append(none := await Node.create(peer_config(fault="none")))  # asks for nothing
    for n in (plain, none):
        assert n.faults is None and type(under_auth(n)) is HttpTransport
        assert fault_spec(n) == "none"
    nodes.append(faulty := await Node.create(peer_config(fault="delay=1ms")))
    pub = operator_pub(tmp_path)
    admin_cfg = peer_config(enable_admin=True, admin_key=pub, join=[plain.addr])
    nodes.append(admin := await Node.create(admin_cfg))
    for n in (faulty, admin):
        assert type(under_auth(n)) is FaultyTransport and under_auth(n) is n.faults
        assert type(n.faults.inner) is HttpTransport
    assert fault_spec(faulty) == "delay=0.001s" and fault_spec(admin) == "none"

    # the operator's admin/fault reaches the layer, and the layer acts on the peer's requests
    body = OPERATOR.sign("admin/fault", encode_control("fault", spec="drop=1"), to=admin.addr)
    assert await post(http, admin.addr, "admin/fault", body) == 200
    assert admin.faults.config.drop == 1.0 and sabotaged(admin)
    await eventually(lambda: admin.faults.stats()["dropped"] > 0, 20, "a dropped gossip")


def test_enabling_admin_needs_an_operator_key():
    with pytest.raises(ConfigError, match="`admin_key`"):
        peer_config(enable_admin=True).validate()


async def test_admin_without_the_operator_key_is_refused_even_on_loopback(
    nodes, http, tmp_path, caplog
):
    """Any local process, a holder of the swarm secret (every peer), another key: all 401."""
    caplog.set_level(logging.INFO)
    secret = "swarm-secret"
    node = await Node.create(
        peer_config(enable_admin=True, admin_key=operator_pub(tmp_path), secret=secret)
    )
    nodes.append(node)
    stranger = OperatorKey.generate()
    stale = OperatorKey(OPERATOR._key, clock=lambda: time.time() - 120)
    for route, body in SABOTAGE:
        attempts = {
            "unsigned, from loopback": body,
            "sealed with the swarm secret": bytes(
                Signer(secret, name="127.0.0.1:9").seal(route, body, to=node.addr)
            ),
            "signed by another key": stranger.sign(route, body, to=node.addr),
            "signed for another route": OPERATOR.sign("admin/other", body, to=node.addr),
            "signed two minutes ago": stale.sign(route, body, to=node.addr),
            "signed, then altered": flip_last(OPERATOR.sign(route, body, to=node.addr)),
        }
        for what, data in attempts.items():
            assert await post(http, node.addr, route, data) == 401, f"{route}: {what}"
            assert not sabotaged(node), f"{route}: {what} was obeyed"
    # the operator itself is obeyed
    ok = OPERATOR.sign("admin/slowdown", encode_control("slowdown", factor=2.0), to=node.addr)
    assert await post(http, node.addr, "admin/slowdown", ok) == 200
    assert node.worker.pacer.slowdown == 2.0
    # a fixed step time rides on the same route; a bad one is refused and changes nothing
    for step_s, status in (("0.5", 400), (float("nan"), 400), (61.0, 400), (0.01, 200)):
        body = encode_control("slowdown", factor=1.0, step_s=step_s)
        signed = OPERATOR.sign("admin/slowdown", body, to=node.addr)
        assert await post(http, node.addr, "admin/slowdown", signed) == status, step_s
    assert (node.worker.pacer.slowdown, node.worker.pacer.step_s) == (1.0, 0.01)
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]


async def test_a_captured_admin_command_replays_nowhere(nodes, http, tmp_path):
    """Issue 10's admin replay: one signed `byzantine huge` to peer a, captured and sent again
    to a, b and c, 4 times each. Before: 12/12 accepted. Now: 0."""
    pub = operator_pub(tmp_path)
    for _ in range(3):
        nodes.append(await Node.create(peer_config(enable_admin=True, admin_key=pub)))
    a, b, c = nodes
    route, body = "admin/byzantine", encode_control("byzantine", kind="huge")
    captured = OPERATOR.sign(route, body, to=a.addr)
    assert await post(http, a.addr, route, captured) == 200  # the operator's own command
    assert a.byzantine.kind == "huge"
    accepted = 0
    for _ in range(4):
        for target in (a, b, c):
            accepted += await post(http, target.addr, route, captured) == 200
    assert accepted == 0
    assert b.byzantine.kind is None and c.byzantine.kind is None


async def test_a_heal_logs_info_and_a_fault_a_warning(nodes, http, tmp_path, caplog):
    """Issue 34 item 6: clearing the faults logged `WARNING faults set at runtime: none`."""
    caplog.set_level(logging.INFO, logger="swarmnode")
    node = await Node.create(peer_config(enable_admin=True, admin_key=operator_pub(tmp_path)))
    nodes.append(node)
    commands = [
        ("admin/fault", encode_control("fault", spec="drop=0.5")),
        ("admin/fault", encode_control("fault", spec="")),
        ("admin/byzantine", encode_control("byzantine", kind="huge")),
        ("admin/byzantine", encode_control("byzantine", kind=None)),
    ]
    for route, body in commands:
        assert await post(http, node.addr, route, OPERATOR.sign(route, body, to=node.addr)) == 200
    assert not sabotaged(node)
    said = [(r.levelname, r.getMessage()) for r in caplog.records if "at runtime" in r.getMessage()]
    assert said == [
        ("WARNING", "faults set at runtime: drop=0.5"),
        ("INFO", "faults cleared at runtime: healed"),
        ("WARNING", "byzantine behaviour set at runtime: huge"),
        ("INFO", "byzantine behaviour cleared at runtime: honest"),
    ]
