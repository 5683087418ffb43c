"""Issue 31, goal 6, with real processes: a peer of another release is refused at join with one
line on both sides naming both versions, and `swarmnode status` against one says so (fake peers
speaking another version, real aiohttp servers, real `swarmnode` processes)."""

from __future__ import annotations

import time
import urllib.error
import urllib.request
from pathlib import Path

import msgpack
import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer
from swarmnode.gossip.auth import VERSION as ENVELOPE_VERSION
from swarmnode.gossip.membership.entries import Gossiped
from swarmnode.gossip.membership.failure import ALIVE
from swarmnode.gossip.membership.records import to_wire
from swarmnode.gossip.wire.control import PROTOCOL_VERSION

from tests.integration.peers import Peer
from tests.integration.test_status_metrics import run_cli
from tests.waiting import eventually, wait_for

pytestmark = [pytest.mark.timeout(120), pytest.mark.slow]

OTHER = PROTOCOL_VERSION + 1


def _both(text: str, sender: int, receiver: int) -> bool:
    return f"protocol version {sender} from the sender, {receiver} at the receiver" in text


def test_a_peer_refuses_a_joiner_of_another_version_with_one_line(tmp_path: Path) -> None:
    seed = Peer(tmp_path, "seed", "--steps", "0").start(90)
    try:
        entry = to_wire(Gossiped("x", "127.0.0.1:9", 1, 1, ALIVE, 0.0, {}))
        body = msgpack.packb({"version": OTHER, "type": "join", "member": entry})
        req = urllib.request.Request(f"http://{seed.addr}/v1/join", data=body)
        with pytest.raises(urllib.error.HTTPError) as err:
            urllib.request.urlopen(req, timeout=5)
        assert err.value.code == 426
        assert _both(err.value.read().decode(), OTHER, PROTOCOL_VERSION)
        line = wait_for(
            lambda: [ln for ln in seed.tail(50).splitlines() if "/v1/join" in ln],
            10,
            "the seed's line",
        )
        assert len(line) == 1 and _both(line[0], OTHER, PROTOCOL_VERSION), line
    finally:
        seed.stop()


async def test_a_joiner_refused_for_its_version_says_so_in_one_line_and_exits(
    tmp_path: Path,
) -> None:
    async def join(_request: web.Request) -> web.Response:  # the next release's seed
        text = (
            f"another swarmnode release: protocol version {PROTOCOL_VERSION} from the sender, "
            f"{OTHER} at the receiver (run the same release on every peer)"
        )
        return web.Response(status=426, text=text)

    app = web.Application()
    app.router.add_post("/v1/join", join)
    async with TestServer(app, host="127.0.0.1") as server:
        fake = f"127.0.0.1:{server.port}"
        joiner = Peer(tmp_path, "joiner", "--join", fake, "--join-timeout", "60").launch()
        assert joiner.process is not None
        t0 = time.monotonic()
        process = joiner.process
        await eventually(lambda: not process.alive(), 60, "the joiner to give up")
        rc = process.proc.wait(5)
    took = time.monotonic() - t0
    assert rc == 2, joiner.tail()
    assert took < 45  # given up at once, not at the join timeout (imports take seconds here)
    said = [ln for ln in joiner.tail(30).splitlines() if "could not join" in ln]
    assert len(said) == 1, joiner.tail()
    assert (
        _both(said[0], PROTOCOL_VERSION, OTHER)
        and f"this joiner speaks protocol version {PROTOCOL_VERSION}" in said[0]
    )
    assert "Traceback" not in joiner.tail(100)


@pytest.mark.parametrize("shape", ["another layout", "the same layout"])
async def test_status_against_a_peer_of_another_version_says_so(shape: str) -> None:
    me = {"peer_id": "x", "version": "99.0", "envelope": ENVELOPE_VERSION + 1, "protocol": OTHER}
    if shape == "another layout":  # a future release that changed its status
        body = {"self": me, "peers": {"x": {}}}
    else:
        body = {"self": me, "members": []}

    async def status(_request: web.Request) -> web.Response:
        return web.json_response(body)

    app = web.Application()
    app.router.add_get("/v1/status", status)
    async with TestServer(app, host="127.0.0.1") as server:
        rc, out, err = await run_cli("--peer", f"127.0.0.1:{server.port}")
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in err, err
    said = lines[0]
    assert "runs another swarmnode release: swarmnode 99.0" in said, said
    assert f"protocol {OTHER}, envelope {ENVELOPE_VERSION + 1}" in said, said
    assert f"(protocol {PROTOCOL_VERSION}, envelope {ENVELOPE_VERSION})" in said, said
    if shape == "another layout":
        assert rc == 2 and out == ""
    else:  # still readable: the table, after the line that says so
        assert rc == 0 and out.strip(), out
