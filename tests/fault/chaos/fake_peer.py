"""A stand-in peer process for the chaos runner's tests: `python fake_peer.py [start flags]`.

It speaks the outside contract of a real peer (docs/architecture.md, "The peer process, seen
from outside") and nothing more: `--listen` (port 0 works), `--ready-file`, `--checkpoint-dir`
(keeps the peer id across restarts), `--name` (shown in the status and the ready file), `--join`; GET /v1/status with a step and an accuracy that
move with time; admin/fault, admin/byzantine, admin/slowdown that show up in the status; POST
/v1/params and /v1/admin/params when swarmnode.gossip.wire.frames exists. Membership is a toy: each peer polls the status of every
peer it knows every 0.2 s and calls one dead after 1.5 s of silence. Unknown flags are ignored.
Being a real process, it obeys SIGKILL, SIGSTOP/SIGCONT and SIGTERM (a clean exit, code 0).

With `--secret` (default `$SWARMNODE_SECRET`, as a real peer) params answers 401 to any request
not sealed with it for this peer and seals its answers, as `auth_handlers` does; with
`--admin-key` the admin routes obey only the operator's signature, as `admin_routes` does;
`/v1/status` shows `"auth": true`. Test-only misbehaviour: `--admin-fails` answers every admin
request 500; `--die-after S --die-shard I` makes the peer of shard I exit (code 3) after S s.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import signal
import sys
import time
import uuid
from pathlib import Path
from typing import Any

from aiohttp import ClientSession, ClientTimeout, web

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))  # the repository root

from swarmnode.gossip.auth.operator import OperatorVerifier
from swarmnode.gossip.auth.signer import Signer
from swarmnode.gossip.errors import AuthError
from swarmnode.gossip.wire.control import decode_control

DEAD_AFTER = 1.5
POLL_EVERY = 0.2
STEPS_PER_S = 50.0


class FakePeer:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.peer_id = _peer_id(args.checkpoint_dir)
        self.t_start = time.monotonic()
        self.addr = ""
        self.faults = "none"
        self.byzantine: str | None = args.byzantine
        self.slowdown = 1.0
        self.known: dict[str, dict[str, Any]] = {}  # addr -> {"peer_id", "heard"}
        self.signer = Signer(args.secret) if args.secret else None
        # admin requests: signed by the operator key, as a real peer started with --enable-admin
        self.operator = OperatorVerifier.load(args.admin_key) if args.admin_key else None

    def step(self) -> int:
        return int((time.monotonic() - self.t_start) * STEPS_PER_S / self.slowdown)

    def acc(self) -> float:
        return 1.0 - 0.9 * math.exp(-self.step() / 150.0)

    def status(self) -> dict[str, Any]:
        step, acc = self.step(), self.acc()
        now = time.monotonic()
        members = [
            {
                "peer_id": m["peer_id"],
                "addr": addr,
                "state": "alive" if now - m["heard"] < DEAD_AFTER else "dead",
                "incarnation": 0,
                "heartbeat": 0,
                "last_heard_s": round(now - m["heard"], 2),
                "step": None,
                "loss": None,
                "acc": None,
                "device": "cpu",
            }
            for addr, m in self.known.items()
            if m["peer_id"] and m["peer_id"] != self.peer_id
        ]
        return {
            "self": {
                "peer_id": self.peer_id,
                "name": self.args.name,
                "addr": self.addr,
                "incarnation": 0,
                "state": "alive",
                "device": "cpu",
                "step": step,
                "loss": -math.log(acc),
                "acc": acc,
                "test_loss": -math.log(acc),
                "samples_per_s": STEPS_PER_S * 32,
                "byzantine": self.byzantine,
                "faults": self.faults,
                "auth": self.signer is not None,
                "exchange": {
                    "mode": "average",
                    "rounds": step // 10,
                    "applied": step // 10,
                    "served": 0,
                    "rejected": 0,
                },
            },
            "members": members,
        }

    # --- routes ----------------------------------------------------------------------------

    async def get_status(self, request: web.Request) -> web.Response:
        caller, caller_id = request.query.get("from"), request.query.get("id")
        if caller and caller_id:  # another fake peer: that is how the seed learns of joiners
            self.known[caller] = {"peer_id": caller_id, "heard": time.monotonic()}
        return web.json_response(self.status())

    def sealed(self, route: str, kind: str, handler: Any) -> Any:
        """A POST route that opens the request (401 if not authentic) and seals the answer."""

        async def wrapped(request: web.Request) -> web.Response:
            body, nonce = await request.read(), b""
            if route.startswith("admin/") and self.args.admin_fails:
                return web.Response(status=500, text="admin refused (--admin-fails)")
            admin = route.startswith("admin/")
            guard = self.operator if admin else self.signer
            if guard is not None:
                try:
                    if admin:
                        body = self.operator.open(route, body)  # type: ignore[union-attr]
                    else:
                        body, nonce = self.signer.unseal(route, body)  # type: ignore[union-attr]
                except AuthError as exc:
                    return web.Response(status=401, text=f"{route}: {exc}")
            answer = await handler(decode_control(bytes(body), kind))
            if isinstance(answer, web.Response):
                return answer
            if self.signer is not None and not admin:
                answer = bytes(self.signer.seal(route, answer, reply_to=nonce))
            return web.Response(body=answer)

        return wrapped

    async def post_fault(self, msg: dict[str, Any]) -> bytes:
        self.faults = str(msg.get("spec", "none"))
        return b"ok"

    async def post_byzantine(self, msg: dict[str, Any]) -> bytes:
        self.byzantine = msg.get("kind")
        return b"ok"

    async def post_slowdown(self, msg: dict[str, Any]) -> bytes:
        self.slowdown = float(msg["factor"])
        return b"ok"

    async def post_params(self, _msg: dict[str, Any]) -> bytes | web.Response:
        try:
            import numpy as np
            from swarmnode.gossip.wire import frames as wire
        except ImportError:
            return web.Response(status=404, text="no swarmnode.gossip.wire.frames")
        vec = np.full(64, 1.0 / (1 + self.step()), dtype=np.float32)
        if self.byzantine:  # poison that shows: far from every honest fake's vector
            vec = vec + np.float32(1000.0)
        return bytes(wire.encode_params(vec, sender=self.peer_id, step=self.step()))

    # --- membership toy ----------------------------------------------------------------------

    async def poll_loop(self, session: ClientSession) -> None:
        while True:
            await asyncio.gather(*(self._poll(session, a) for a in list(self.known)))
            await asyncio.sleep(POLL_EVERY)

    async def _poll(self, session: ClientSession, addr: str) -> None:
        url = f"http://{addr}/v1/status?from={self.addr}&id={self.peer_id}"
        try:
            async with session.get(url, timeout=ClientTimeout(total=0.5)) as resp:
                status = await resp.json()
        except Exception:  # unreachable or frozen: silence is what the detector measures
            return
        me = status["self"]
        self.known[addr] = {"peer_id": me["peer_id"], "heard": time.monotonic()}
        for m in status["members"]:
            if m["addr"] != self.addr and m["addr"] not in self.known and m["state"] == "alive":
                self.known[m["addr"]] = {"peer_id": m["peer_id"], "heard": time.monotonic()}


def _peer_id(checkpoint_dir: str | None) -> str:
    if not checkpoint_dir:
        return uuid.uuid4().hex[:12]
    path = Path(checkpoint_dir) / "peer_id"
    path.parent.mkdir(parents=True, exist_ok=True)
    if not path.exists():
        path.write_text(uuid.uuid4().hex[:12])
    return path.read_text().strip()


def _die() -> None:
    print("dying on purpose (--die-after)", flush=True)
    os._exit(3)


def _write_ready(path: str, peer: FakePeer) -> None:
    tmp = Path(path + ".tmp")
    info = {"peer_id": peer.peer_id, "name": peer.args.name, "addr": peer.addr, "pid": os.getpid()}
    tmp.write_text(json.dumps(info))
    os.replace(tmp, path)


async def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--listen", default="127.0.0.1:0")
    p.add_argument("--ready-file")
    p.add_argument("--name")
    p.add_argument("--checkpoint-dir")
    p.add_argument("--join", default="")
    p.add_argument("--byzantine")
    p.add_argument("--secret", default=os.environ.get("SWARMNODE_SECRET"))
    p.add_argument("--shard", default="0/1")
    p.add_argument("--admin-fails", action="store_true")
    p.add_argument("--admin-key", default=None)
    p.add_argument("--die-after", type=float, default=None)
    p.add_argument("--die-shard", type=int, default=None)
    args, _unknown = p.parse_known_args(argv)
    peer = FakePeer(args)
    app = web.Application()
    app.router.add_get("/v1/status", peer.get_status)
    for kind in ("fault", "byzantine", "slowdown"):
        handler = peer.sealed(f"admin/{kind}", kind, getattr(peer, f"post_{kind}"))
        app.router.add_post(f"/v1/admin/{kind}", handler)
    app.router.add_post("/v1/params", peer.sealed("params", "pull", peer.post_params))
    # the chaos probe reads models as the operator (real peers serve `params` to members only)
    app.router.add_post("/v1/admin/params", peer.sealed("admin/params", "params", peer.post_params))
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    host, _, port = args.listen.rpartition(":")
    site = web.TCPSite(runner, host, int(port))
    await site.start()
    bound = site._server.sockets[0].getsockname()  # port 0: the port the kernel picked
    peer.addr = f"{host}:{bound[1]}"
    for named in filter(None, (peer.signer, peer.operator)):  # requests are addressed to us
        named.name = peer.addr
    for seed in filter(None, args.join.split(",")):
        peer.known[seed] = {"peer_id": None, "heard": time.monotonic()}
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    async with ClientSession() as session:
        poller = asyncio.create_task(peer.poll_loop(session))
        if args.ready_file:
            await asyncio.to_thread(_write_ready, args.ready_file, peer)
        print(f"listening on {peer.addr} as {peer.peer_id}", flush=True)
        if args.die_after is not None and int(args.shard.split("/")[0]) == args.die_shard:
            loop.call_later(args.die_after, _die)
        await stop.wait()
        poller.cancel()
        await asyncio.gather(poller, return_exceptions=True)
    await runner.cleanup()
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main(sys.argv[1:])))
