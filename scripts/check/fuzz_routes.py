"""Fuzz every POST route of a real peer with malformed messages; count crashes, 5xx and hangs.

    .venv/bin/python scripts/check/fuzz_routes.py                  # 10,000 messages, no secret
    .venv/bin/python scripts/check/fuzz_routes.py --secret         # the same through the HMAC layer
    .venv/bin/python scripts/check/fuzz_routes.py --compress lowrank:4   # push-pulls: lr16 deltas
    .venv/bin/python scripts/check/fuzz_routes.py --envelope --model mlp:1024,512 [--secret]
                                    # the envelopes themselves: v5 heads, bodies, trailers

One in-process `Node` (admin enabled with a throwaway operator key, so admin bodies reach their
parsers: each admin message is signed; with --secret each protocol message is sealed for the
peer, so the fuzz reaches msgpack and the wire decoder rather than stopping at 401; pulls and
push-pulls come from an admitted member, signed by its key, as an insider's would). Messages
are mutations of a valid body per route: bit flips, truncations, extensions, random bytes,
random msgpack values, valid maps with fields replaced by random values; with `--envelope` the
sealed envelope itself is mutated instead (its head, its body and its trailer, half of them at
a seam between the three: gossip/auth/signer.py), and with a model past 1 MiB (`--model`) every
push-pull takes the streamed path, its head verified before its body is read. Then raw-socket
framing cases (lying Content-Length, broken chunking, garbage request lines) and a burst of
concurrent connections. A hang is a request with no answer within 10 s; a crash is the peer
not answering `GET /v1/status` afterwards, or a task of the node dying.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

import aiohttp
import msgpack
import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from swarmnode.fault.hostile.insider import admit  # noqa: E402
from swarmnode.gossip.auth.operator import OperatorKey  # noqa: E402
from swarmnode.gossip.auth.peer_key import PeerKey  # noqa: E402
from swarmnode.gossip.auth.signer import (  # noqa: E402
    FIXED_BYTES,
    HEAD_AUTH_BYTES,
    SIGNED_ROUTES,
    TRAILER_BYTES,
    Signer,
    header_length,
)
from swarmnode.gossip.exchange.exchanger import ExchangeConfig  # noqa: E402
from swarmnode.gossip.exchange.refs import init_epoch  # noqa: E402
from swarmnode.gossip.wire import frames as wire  # noqa: E402
from swarmnode.gossip.wire.control import encode_control  # noqa: E402
from swarmnode.kernels import compress as kcompress  # noqa: E402
from swarmnode.node.peer.node import Node  # noqa: E402
from swarmnode.node.peer.state_sync import param_segments  # noqa: E402
from swarmnode.node.settings import PeerConfig  # noqa: E402

HANG_S = 10.0
ENTRY = ["fuzzer", "127.0.0.1:9", 0, 1, "alive", 0.0, {}]


def admit_member(node: Node, secret: str | None) -> Signer:
    """A member of the node's swarm, as an insider with its own key (and the secret) is: its
    signed pulls and push-pulls pass admission, so the mutations reach the wire decoder and
    the exchange instead of stopping at 403."""
    signer = Signer(secret, key=PeerKey.generate(), signed_routes=SIGNED_ROUTES, name="127.0.0.1:9")
    admit(node, signer)
    return signer


def pushpull_body(node: Node, compress: str, sender: str) -> bytes:
    """A valid push-pull: the whole model, or (`compress`) a delta on the node's shared start,
    so that mutations reach that codec's decoder (lr16's segment plan, tk16's counts, ...)."""
    x = np.zeros(node.store.size, np.float32)
    if compress == "none":
        return bytes(wire.encode_params(x, sender=sender, step=1))
    name, ratio = kcompress.parse_codec(compress)
    x0 = node.init_params
    packed = kcompress.encode(x - x0, name, ratio, segs=param_segments(node.trainer))
    fields = {"ref": "delta", "ref_epoch": init_epoch(x0), "ref_ver": 1, "mix": 0.25}
    return bytes(wire.encode_packed(packed, sender=sender, step=1, extra=fields))


def valid_bodies(size: int) -> dict[str, bytes]:
    return {
        "gossip": encode_control("gossip", sender="f", members=[ENTRY]),
        "join": encode_control("join", member=ENTRY),
        "leave": encode_control("leave", member=[*ENTRY[:4], "left", 0.0, {}]),
        "params": encode_control("pull", sender="f"),
        "pushpull": bytes(wire.encode_params(np.zeros(size, np.float32), sender="f", step=1)),
        "admin/fault": encode_control("fault", spec="none"),
        "admin/byzantine": encode_control("byzantine", kind=None),
        "admin/slowdown": encode_control("slowdown", factor=1.0),
    }


def random_value(rng: random.Random, depth: int = 0) -> Any:
    kinds = ["int", "float", "str", "bytes", "none", "bool"] + (
        ["list", "map"] if depth < 3 else []
    )
    k = rng.choice(kinds)
    if k == "int":
        return rng.choice([0, -1, 1, 2**31, -(2**63), 2**64 - 1, rng.randint(-1000, 1000)])
    if k == "float":
        return rng.choice([0.0, -0.0, float("nan"), float("inf"), -1e308, 1e-308, rng.random()])
    if k == "str":
        return rng.choice(["", "x" * rng.randint(1, 300), "\u0000\uffff", "alive", "params"])
    if k == "bytes":
        return rng.randbytes(rng.randint(0, 64))
    if k == "none":
        return None
    if k == "bool":
        return rng.random() < 0.5
    if k == "list":
        return [random_value(rng, depth + 1) for _ in range(rng.randint(0, 8))]
    return {random_value(rng, 3): random_value(rng, depth + 1) for _ in range(rng.randint(0, 6))}


def mutate(rng: random.Random, valid: bytes) -> bytes:
    how = rng.randrange(7)
    data = bytearray(valid)
    if how == 0 and data:  # bit flips
        for _ in range(rng.randint(1, 8)):
            data[rng.randrange(len(data))] ^= 1 << rng.randrange(8)
    elif how == 1:  # truncation
        del data[rng.randint(0, len(data)) :]
    elif how == 2:  # extension
        data += rng.randbytes(rng.randint(1, 256))
    elif how == 3:  # random bytes
        data = bytearray(rng.randbytes(rng.randint(0, 512)))
    elif how == 4:  # a random msgpack value
        data = bytearray(msgpack.packb(random_value(rng), use_bin_type=True))
    elif how == 5:  # a valid map with a field replaced
        try:
            msg = msgpack.unpackb(valid, raw=False, strict_map_key=False)
        except Exception:  # a parameter frame: flip the header instead
            msg = None
        if isinstance(msg, dict) and msg:
            msg[rng.choice(list(msg))] = random_value(rng)
            data = bytearray(msgpack.packb(msg, use_bin_type=True))
        elif data:
            data[rng.randrange(min(len(data), 64))] ^= 0xFF
    else:  # byte run overwrite
        if data:
            start = rng.randrange(len(data))
            data[start : start + 16] = rng.randbytes(16)
    return bytes(data)


RAW_CASES_NO_HOST = [
    b"GARBAGE\r\n\r\n",
    b"POST /v1/gossip HTTP/1.1\r\nContent-Length: -1\r\n\r\n",
    b"POST /v1/gossip HTTP/1.1\r\nContent-Length: 99999999999999999999\r\n\r\n",
    b"POST /v1/gossip HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nabc\r\n0\r\n\r\n",
    b"POST /v1/pushpull HTTP/1.1\r\nContent-Length: 10\r\nContent-Length: 20\r\n\r\n0123456789",
    b"POST /v1/" + b"a" * 10000 + b" HTTP/1.1\r\n\r\n",
    b"POST /v1/params HTTP/1.1\r\n" + b"X: " + b"y" * 100000 + b"\r\n\r\n",
    b"POST /v1/join HTTP/9.9\r\nContent-Length: 1\r\n\r\nx",
    b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03",  # a TLS ClientHello
    b"POST /v1/leave HTTP/1.1\r\nContent-Length: 5\r\n\r\nab",  # short: cut after the grace
]
# HTTP/1.1 without a Host header is refused before anything else: give them one (and keep one
# case without, for that refusal)
RAW_CASES = [c.replace(b" HTTP/1.1\r\n", b" HTTP/1.1\r\nHost: x\r\n", 1) for c in RAW_CASES_NO_HOST]
RAW_CASES.append(b"POST /v1/gossip HTTP/1.1\r\nContent-Length: 1\r\n\r\nx")


def mutate_envelope(rng: random.Random, sealed: bytes) -> bytes:
    """A sealed envelope mutated: half the time one to four bits at a seam of its head, body
    and trailer (a name length, the signed body length, the head's tag and signature, the
    first and last body bytes, the digest, tag and signature), else as any body."""
    if rng.random() < 0.5:
        return mutate(rng, sealed)
    head, end = header_length(sealed), len(sealed) - TRAILER_BYTES
    seams = [FIXED_BYTES, head - HEAD_AUTH_BYTES - 9, head - 96, head, end - 1, end, end + 32]
    data = bytearray(sealed)
    for _ in range(rng.randint(1, 4)):
        at = min(len(data) - 1, max(0, rng.choice(seams) + rng.randint(-3, 3)))
        data[at] ^= 1 << rng.randrange(8)
    return bytes(data)


async def raw(addr: str, data: bytes) -> str:
    host, port = addr.rsplit(":", 1)
    reader, writer = await asyncio.open_connection(host, int(port))
    try:
        writer.write(data)
        await writer.drain()
        line = await asyncio.wait_for(reader.readline(), HANG_S)
        return line.split(b" ")[1].decode() if line.count(b" ") >= 1 else "closed"
    except asyncio.TimeoutError:
        return "hang"
    except (ConnectionError, IndexError):
        return "closed"
    finally:
        writer.close()


async def run(
    n: int,
    secret: bool,
    seed: int,
    compress: str = "none",
    envelope: bool = False,
    model: str = "mlp:8",
) -> dict[str, Any]:
    rng = random.Random(seed)
    op = OperatorKey.generate()
    with tempfile.TemporaryDirectory() as tmp:
        pub = Path(tmp) / "operator.pub"
        pub.write_bytes(op.public_pem())
        cfg = PeerConfig(model=model, steps=0, listen="127.0.0.1:0", eval_every=10**6,
                         slowdown=4.0, enable_admin=True, admin_key=str(pub),
                         body_grace_s=1.0,  # the short-body raw case is cut after 1 s, not 5
                         secret="fuzz" if secret else None,
                         exchange=ExchangeConfig(compress=compress))  # fmt: skip
        node = await Node.create(cfg)
        signer = Signer("fuzz", name="127.0.0.1:9")
        statuses: Counter[str] = Counter()
        t0 = time.monotonic()
        try:
            member = admit_member(node, "fuzz" if secret else None)
            bodies = {
                **valid_bodies(node.store.size),
                "params": encode_control("pull", sender=member.key.peer_id),
                "pushpull": pushpull_body(node, compress, member.key.peer_id),
            }
            routes = list(bodies)
            timeout = aiohttp.ClientTimeout(total=HANG_S)
            async with aiohttp.ClientSession(timeout=timeout) as http:
                for i in range(n):
                    route = routes[i % len(routes)]
                    body = bodies[route] if envelope else mutate(rng, bodies[route])
                    if route.startswith("admin/"):
                        body = op.sign(route, body, to=node.addr)
                    elif member.wraps(route):  # the model routes: signed by a member's key
                        body = bytes(member.seal(route, body, to=node.addr))
                    elif secret:
                        body = bytes(signer.seal(route, body, to=node.addr))
                    forged = False
                    sealed = not route.startswith("admin/") and (secret or member.wraps(route))
                    if envelope and sealed:
                        mutant = mutate_envelope(rng, body)
                        forged, body = mutant != body, mutant
                        statuses["envelopes mutated"] += forged
                    try:
                        async with http.post(f"http://{node.addr}/v1/{route}", data=body) as r:
                            await r.read()
                            statuses[str(r.status)] += 1
                            # a changed envelope taken whole: authentication was bypassed
                            statuses["forged accepted"] += forged and r.status < 300
                    except asyncio.TimeoutError:
                        statuses["hang"] += 1
                    except (aiohttp.ClientPayloadError, aiohttp.ServerDisconnectedError):
                        # an answer begun while the push arrived, cut off once it failed
                        # its digest or trailer; or the connection closed on its unread body
                        statuses["200 cut off"] += 1
                    except aiohttp.ClientOSError:  # reset on the unread rest of a refused push
                        statuses["reset"] += 1
                for case in RAW_CASES * 20:
                    statuses["raw " + await raw(node.addr, case)] += 1
                burst = await asyncio.gather(
                    *(raw(node.addr, b"POST /v1/gossip HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\nabc")
                      for _ in range(1500))
                )  # fmt: skip
                statuses.update("burst " + s for s in burst)
                async with http.get(f"http://{node.addr}/v1/status") as r:
                    alive = r.status == 200
            finite = bool(np.isfinite(node.params_host()).all())
            crashed = node.crashed is not None
        finally:
            await node.close()
    mutated = statuses.pop("envelopes mutated", 0)
    forged = statuses.pop("forged accepted", 0)
    fivexx = sum(v for k, v in statuses.items() if k.split()[-1].startswith("5"))
    hangs = sum(v for k, v in statuses.items() if k.endswith("hang"))
    return {
        "messages": n,
        "envelopes mutated": mutated,
        "forged accepted": forged,
        "model bytes": node.store.size * 4,
        "raw cases": len(RAW_CASES) * 20,
        "burst": 1500,
        "seconds": round(time.monotonic() - t0, 1),
        "statuses": dict(sorted(statuses.items())),
        "5xx": fivexx,
        "hangs": hangs,
        "crashes": int(crashed or not alive),
        "model finite": finite,
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("-n", type=int, default=10_000, help="malformed messages over the routes")
    ap.add_argument("--secret", action="store_true", help="seal each message with a secret")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument(
        "--compress",
        default="none",
        help="the peer's --compress; push-pulls are then mutated deltas in that codec",
    )
    ap.add_argument(
        "--envelope",
        action="store_true",
        help="mutate the sealed envelopes (head, body, trailer), not the bodies inside them",
    )
    ap.add_argument("--model", default="mlp:8", help="the peer's model (past 1 MiB: streamed)")
    args = ap.parse_args()
    result = asyncio.run(
        run(args.n, args.secret, args.seed, args.compress, args.envelope, args.model)
    )
    for k, v in result.items():
        print(f"{k}: {v}")
    ok = result["5xx"] == 0 and result["hangs"] == 0 and not result["crashes"]
    ok = ok and result["forged accepted"] == 0
    print("PASS" if ok and result["model finite"] else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
