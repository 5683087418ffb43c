"""What a peer tells the outside: `GET /v1/status`, `GET /metrics`, and `swarmnode status`.

A small live swarm of in-process `Node`s on 127.0.0.1; the CLI runs as a real subprocess against
it (started with asyncio, so the nodes keep serving on this loop while it runs). The status JSON
is checked against the schema in docs/architecture.md ("The peer process, seen from outside"),
the metrics are parsed with prometheus-client's own parser and compared with the status.
"""

from __future__ import annotations

import asyncio
import json
import math
import re
import socket
import sys
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer
from prometheus_client.parser import text_string_to_metric_families
from swarmnode.node.peer.node import Node
from swarmnode.node.settings import PeerConfig

from tests.integration.inprocess import evaluated_swarm
from tests.integration.inprocess import peer_config as in_process_config
from tests.integration.peers import ENV
from tests.waiting import eventually

pytestmark = pytest.mark.timeout(90)

MEMBER_STATES = {"alive", "suspect", "dead", "left"}
NUMBER = (int, float)
OPT_NUMBER = (int, float, type(None))
SELF_SCHEMA: dict[str, Any] = {
    "peer_id": str,
    "name": (str, type(None)),
    "addr": str,
    "incarnation": int,
    "state": str,
    "device": str,
    "step": int,
    "loss": OPT_NUMBER,
    "acc": OPT_NUMBER,
    "test_loss": OPT_NUMBER,
    "samples_per_s": OPT_NUMBER,
    "utilization": NUMBER,
    "waited_s": NUMBER,
    "byzantine": (str, type(None)),
    "faults": str,
    "consensus_dist": OPT_NUMBER,
    "exchange": dict,
    "links": list,
}
EXCHANGE_SCHEMA = {
    "mode": str,
    "rounds": int,
    "applied": int,
    "served": int,
    "rejected": int,
    "pushes_mixed": int,
    "pushes_refused": int,
    "bytes_sent": int,
}
MEMBER_SCHEMA: dict[str, Any] = {
    "peer_id": str,
    "name": (str, type(None)),
    "addr": str,
    "state": str,
    "incarnation": int,
    "heartbeat": int,
    "last_heard_s": NUMBER,
    "step": (int, type(None)),
    "loss": OPT_NUMBER,
    "acc": OPT_NUMBER,
    "device": (str, type(None)),
}


def peer_config(**kw: Any) -> PeerConfig:
    return in_process_config(**{"eval_every": 20, **kw})


@pytest.fixture
async def swarm() -> AsyncIterator[list[Node]]:
    """Three peers that see each other alive and have each evaluated once while training."""
    async with evaluated_swarm(peer_config) as nodes:
        yield nodes


async def freeze(nodes: list[Node]) -> None:
    """Stop training (and with it the exchange loops) so steps and counters hold still."""
    for n in nodes:
        assert await asyncio.to_thread(n.worker.stop, 30.0)


async def get(http: aiohttp.ClientSession, node: Node, path: str) -> tuple[int, str, str]:
    async with http.get(f"http://{node.addr}{path}") as resp:
        return resp.status, resp.headers.get("Content-Type", ""), await resp.text()


def check_fields(obj: dict[str, Any], schema: dict[str, Any], where: str) -> None:
    missing = set(schema) - set(obj)
    assert not missing, f"{where} lacks {sorted(missing)}"
    for key, kind in schema.items():
        value = obj[key]
        ok = isinstance(value, kind) and not (isinstance(value, bool) and kind in (int, NUMBER))
        assert ok, f"{where}.{key} = {value!r} is not {kind}"
        if isinstance(value, float):
            assert math.isfinite(value), f"{where}.{key} is {value} (JSON has no NaN)"


def check_status_schema(status: dict[str, Any], node: Node) -> None:
    assert set(status) >= {"self", "members"}
    me = status["self"]
    check_fields(me, SELF_SCHEMA, "self")
    check_fields(me["exchange"], EXCHANGE_SCHEMA, "self.exchange")
    assert me["peer_id"] == node.peer_id and me["addr"] == node.addr
    assert me["state"] in ("alive", "leaving")
    assert me["acc"] is None or 0.0 <= me["acc"] <= 1.0
    assert isinstance(status["members"], list)
    for m in status["members"]:
        check_fields(m, MEMBER_SCHEMA, f"member {m.get('peer_id')}")
        assert m["state"] in MEMBER_STATES
        assert m["peer_id"] != node.peer_id, "a peer lists itself among the members"
        assert m["acc"] is None or 0.0 <= m["acc"] <= 1.0


def parse_metrics(text: str) -> dict[str, Any]:
    """{family name: family} from prometheus-client's parser (which rejects malformed text)."""
    return {f.name: f for f in text_string_to_metric_families(text)}


def value_of(families: dict[str, Any], name: str, **labels: str) -> float:
    samples = [
        s
        for f in families.values()
        for s in f.samples
        if s.name == name and all(s.labels.get(k) == v for k, v in labels.items())
    ]
    assert len(samples) == 1, f"{name}{labels}: {samples}"
    return samples[0].value


def same_number(metric: float, status_value: float | None) -> bool:
    if status_value is None:
        return math.isnan(metric)
    return math.isclose(metric, status_value, rel_tol=1e-9, abs_tol=1e-12)


# --- the tests -----------------------------------------------------------------------------


async def test_status_schema_and_metrics_agree(swarm):
    a, b, c = swarm
    await freeze(swarm)
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=30)) as http:
        for node in swarm:
            code, ctype, text = await get(http, node, "/v1/status")
            assert code == 200 and ctype.startswith("application/json")
            status = json.loads(text)
            check_status_schema(status, node)
            me = status["self"]
            assert me["step"] == node.trainer.step_count > 0
            assert me["acc"] is not None and me["exchange"]["mode"] == "average"
            # its distance to the models its rounds gathered (rounds ran: the peers are alive)
            assert me["consensus_dist"] is None or me["consensus_dist"] >= 0
            assert {m["peer_id"] for m in status["members"]} == {
                o.peer_id for o in swarm if o is not node
            }
            # the id is the key's; the name (--name) travels signed in each member's record
            assert me["name"] == node.name
            assert {(m["peer_id"], m["name"]) for m in status["members"]} == {
                (o.peer_id, o.name) for o in swarm if o is not node
            }
            assert all(m["state"] == "alive" for m in status["members"])

            code, ctype, text = await get(http, node, "/metrics")
            assert code == 200 and ctype.startswith("text/plain")
            fam = parse_metrics(text)
            after_me = json.loads((await get(http, node, "/v1/status"))[2])["self"]
            pid = {"peer_id": node.peer_id}
            for metric, key in [
                ("swarmnode_step", "step"),
                ("swarmnode_test_accuracy", "acc"),
                ("swarmnode_test_loss", "test_loss"),
                ("swarmnode_train_loss", "loss"),
                ("swarmnode_compute_utilization", "utilization"),  # fixed once training ended
            ]:
                assert fam[metric].type == "gauge"
                assert same_number(value_of(fam, metric, **pid), me[key]), (metric, me[key])
            for metric, key in [
                ("swarmnode_exchange_rounds", "rounds"),
                ("swarmnode_exchange_applied", "applied"),
                ("swarmnode_exchange_served", "served"),
                ("swarmnode_exchange_rejected", "rejected"),
                ("swarmnode_pushes_mixed", "pushes_mixed"),
                ("swarmnode_pushes_refused", "pushes_refused"),
            ]:
                # Training is frozen but an exchange round already in flight can still land
                # between two reads: a counter read from /metrics must lie between the
                # status read before it and the one after it (counters only grow).
                assert fam[metric].type == "counter"
                got = value_of(fam, metric + "_total", **pid)
                before, after = me["exchange"][key], after_me["exchange"][key]
                assert before <= got <= after, (metric, before, got, after)
            assert 0.0 <= me["utilization"] <= 1.0 and me["waited_s"] >= 0.0
            waited = value_of(fam, "swarmnode_exchange_wait_seconds_total", **pid)
            assert waited == me["waited_s"]
            for state in MEMBER_STATES:
                want = sum(m["state"] == state for m in status["members"])
                assert value_of(fam, "swarmnode_members", state=state, **pid) == want, state
            # each partner this peer has talked to: its link, as this peer measured it
            members_by_addr = {m["addr"]: m for m in status["members"]}
            assert me["links"], "no link measured after gossip rounds"
            for link in me["links"]:
                m = members_by_addr[link["addr"]]
                assert link["peer_id"] == m["peer_id"] and link["requests"] > 0
                assert link["rtt_ms"] is None or link["rtt_ms"] > 0
                sent = value_of(fam, "swarmnode_link_sent_bytes_total", partner=link["addr"], **pid)
                assert sent >= link["bytes_sent"] > 0

        # A peer that leaves is a `left` tombstone in the others' status and metrics.
        await c.close()
        await eventually(
            lambda: str(a.membership.get(c.peer_id).state) == "left", 10, "a sees c left"
        )
        status = json.loads((await get(http, a, "/v1/status"))[2])
        check_status_schema(status, a)
        states = {m["peer_id"]: m["state"] for m in status["members"]}
        assert states == {b.peer_id: "alive", c.peer_id: "left"}
        fam = parse_metrics((await get(http, a, "/metrics"))[2])
        assert value_of(fam, "swarmnode_members", state="left", peer_id=a.peer_id) == 1
        assert value_of(fam, "swarmnode_members", state="alive", peer_id=a.peer_id) == 1


async def run_cli(*args: str) -> tuple[int, str, str]:
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "swarmnode", "status", *args,
        env=ENV, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    out, err = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode is not None
    return proc.returncode, out.decode(), err.decode()


def free_port() -> int:
    """A port nothing listens on (bound, then released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.slow
async def test_cli_status_prints_every_member_and_fails_cleanly(swarm):
    a, b, c = swarm
    await c.close()  # a tombstone must be listed too
    await eventually(lambda: str(a.membership.get(c.peer_id).state) == "left", 10, "a sees c left")

    (rc, out, err), (rc_json, out_json, _), (rc_dead, out_dead, err_dead) = await asyncio.gather(
        run_cli("--peer", a.addr),
        run_cli("--peer", a.addr, "--json"),
        run_cli("--peer", f"127.0.0.1:{free_port()}", "--timeout", "5"),
    )

    assert rc == 0, err
    header, rule, *lines, note = out.strip().splitlines()
    assert note.startswith("(step, loss and acc of the other peers"), out
    assert header.split()[:3] == ["peer", "name", "address"] and set(rule) <= {"-", " "}, out
    rows = {line.split()[0]: line for line in lines}
    assert set(rows) == {a.peer_id, b.peer_id, c.peer_id}, out
    for node, state in [(a, "self"), (b, "alive"), (c, "left")]:
        # by words, not columns: the device column may hold spaces ("cuda:0 (H100 ...)")
        assert re.search(rf"\s{re.escape(node.addr)}\s.*\s{state}\s", rows[node.peer_id]), out

    assert rc_json == 0
    status = json.loads(out_json)
    check_status_schema(status, a)
    assert {m["peer_id"] for m in status["members"]} == {b.peer_id, c.peer_id}

    assert rc_dead == 2 and out_dead == ""
    lines = err_dead.strip().splitlines()
    assert len(lines) == 1 and "no answer from" in lines[0], err_dead


@pytest.mark.parametrize(
    ("what", "reply"),
    [
        ("a JSON list", web.json_response([1, 2])),
        ("a map without self", web.json_response({"peers": []})),
        ("members not a list", web.json_response({"self": {}, "members": 5})),
        (
            "values of the wrong type",
            web.json_response(
                {
                    "self": {"acc": "x", "loss": [], "peer_id": 3},
                    "members": [{"peer_id": None, "state": 5, "last_heard_s": "y"}, {}],
                }
            ),
        ),
        ("not JSON", web.Response(text="<html>hello</html>")),
        ("an HTTP error", web.Response(status=503, text="busy")),
    ],
)
@pytest.mark.slow
async def test_cli_status_against_something_that_is_not_a_peer(what, reply):
    async def status(_request: web.Request) -> web.Response:
        return reply

    app = web.Application()
    app.router.add_get("/v1/status", status)
    async with TestServer(app, host="127.0.0.1") as server:
        rc, out, err = await run_cli("--peer", f"127.0.0.1:{server.port}")
    if what == "values of the wrong type":  # still a status: shown as it is, not a crash
        assert rc == 0, (out, err)
        assert len(out.strip().splitlines()) == 2 + 3 + 1 and " x " in out and " y " in out, out
        return
    assert rc == 2, (what, out, err)
    assert out == "" and len(err.strip().splitlines()) == 1, (what, err)
    assert "Traceback" not in err


# --- what an outsider reads of a closed swarm (issue 34, item 18) --------------------------

SECRET = "the-closed-swarm"


@pytest.fixture
async def closed() -> AsyncIterator[list[Node]]:
    """Two peers of a `--secret` swarm, each with a fault set and a shard (what must not leak)."""
    config = lambda **kw: peer_config(secret=SECRET, fault="delay=1ms", **kw)  # noqa: E731
    async with evaluated_swarm(config, names=("a", "b")) as nodes:
        yield nodes


async def test_a_closed_swarm_shows_an_outsider_only_that_it_is_up(closed, monkeypatch):
    from swarmnode.gossip.auth.read_token import bearer, read_token
    from swarmnode.node.web import access

    a, b = closed
    monkeypatch.setattr(access, "TRUST_LOOPBACK", False)  # play an outsider on 127.0.0.1
    # the routes read the rule when built: a peer built now is one outsiders reach
    c = await Node.create(peer_config(secret=SECRET, join=[a.addr], name="c", fault="delay=1ms"))
    try:
        await eventually(lambda: len(c.membership.live_peers()) == 2, 20, "c to see a and b")
        token = read_token(SECRET)
        async with aiohttp.ClientSession() as http:
            base = f"http://{c.addr}"
            async with http.get(base + "/v1/status") as r:
                outside = await r.json()
            assert r.status == 200 and outside == {
                "self": {"state": "alive", "version": outside["self"]["version"],
                         "envelope": outside["self"]["envelope"],
                         "protocol": outside["self"]["protocol"]},  # versions: say a skew
                "members": [], "closed": True,
            }  # fmt: skip
            for path in ("/metrics", "/v1/figures", "/v1/watch/now", "/v1/watch"):
                for headers in ({}, bearer("0" * 32)):  # none, and a wrong one
                    async with http.get(base + path, headers=headers) as r:
                        assert r.status == 401, (path, headers, r.status)
                        assert "closed swarm" in await r.text()
            async with http.get(base + "/") as r:  # the page itself holds no figures
                assert r.status == 200
            # with the read token: everything, as a member's operator sees it
            async with http.get(base + "/v1/status", headers=bearer(token)) as r:
                inside = await r.json()
            assert inside["self"]["faults"] == "delay=0.001s"
            assert {m["peer_id"] for m in inside["members"]} == {a.peer_id, b.peer_id}
            async with http.get(base + "/metrics", headers=bearer(token)) as r:
                assert r.status == 200 and "swarmnode_step" in await r.text()
            async with http.get(f"{base}/v1/watch?token={token}") as r:  # as the page asks
                assert r.status == 200 and r.content_type == "text/event-stream"
            # c's own watch asks a and b with the token: their figures are fresh, not 401
            async with http.get(base + "/v1/watch/now", headers=bearer(token)) as r:
                rows = {m["peer_id"]: m for m in (await r.json())["members"]}
            assert rows[a.peer_id]["source"] == "fresh", rows[a.peer_id]["why"]

        from swarmnode.node.cli.command import main

        env = {"SWARMNODE_SECRET": SECRET}
        monkeypatch.delenv("SWARMNODE_SECRET", raising=False)
        code = await asyncio.to_thread(main, ["status", "--peer", c.addr])
        assert code == 2  # without the secret: one line that says what is needed
        monkeypatch.setenv("SWARMNODE_SECRET", env["SWARMNODE_SECRET"])
        assert await asyncio.to_thread(main, ["status", "--peer", c.addr]) == 0
        assert await asyncio.to_thread(main, ["status", "--peer", c.addr, "--secret", "x"]) == 2
    finally:
        await c.close()


async def test_a_closed_swarms_peer_shows_everything_on_this_machine(closed):
    a, _ = closed
    async with aiohttp.ClientSession() as http:
        for path in ("/v1/status", "/metrics", "/v1/figures", "/v1/watch/now"):
            async with http.get(f"http://{a.addr}{path}") as r:
                assert r.status == 200, path
        async with http.get(f"http://{a.addr}/v1/status") as r:
            assert "closed" not in await r.json()
