#!/usr/bin/env python
"""What signing adds to the critical path of a 100 MB push-pull with `--secret` (issue 10).

    .venv/bin/python scripts/bench/exchange/seal_path.py [--mb 100] [--rounds 9]

One process, real aiohttp on 127.0.0.1: `AuthTransport(HttpTransport)` against an
`auth_handlers` echo, both sides signing with a member key and the swarm secret, the answer
sealed. Per body it times, in the same rounds:

- `pre-hash`: `Signer.seal_parts` of the body, i.e. BLAKE3 (all threads) + HMAC + Ed25519
  before the first byte: what an envelope v3 sender paid per direction;
- `trailer`: how long a v4 sender waits, after its last body byte was written, for its trailer
  (the last hashing range + HMAC + Ed25519);
- `finish`: how long a receiver waits, after the last byte arrived, for its streamed digest.

The hashing itself still costs CPU (four BLAKE3 passes per push-pull); this measures only the
waits on the critical path. Client and server share one process here (and its GIL).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
from swarmnode.gossip.link.transport import Arrival

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

from swarmnode.gossip.auth.peer_key import PeerKey
from swarmnode.gossip.auth.seal_stream import StreamedSeal
from swarmnode.gossip.auth.signer import Signer
from swarmnode.gossip.auth.stream_digest import StreamDigest
from swarmnode.gossip.auth.transport import AuthTransport, auth_handlers
from swarmnode.node.net.app import build_app, serve
from swarmnode.node.net.transport import HttpTransport

ROUTE = "pushpull"


def timed(cls: Any, name: str, into: list[float], only: Any = lambda self: True) -> None:
    """Wrap the coroutine method `cls.name` so each call's duration (where `only(self)`)
    lands in `into`."""
    real = getattr(cls, name)

    async def wrapper(self: Any, *args: Any, **kw: Any) -> Any:
        t0 = time.perf_counter()
        try:
            return await real(self, *args, **kw)
        finally:
            if only(self):
                into.append(time.perf_counter() - t0)

    setattr(cls, name, wrapper)


async def run(nbytes: int, rounds: int) -> dict[str, list[float]]:
    key = PeerKey.generate()
    keys = {key.peer_id: key.public}.get
    server = Signer("bench", key=key, keys=keys, signed_routes={ROUTE})
    client = Signer("bench", key=key, signed_routes={ROUTE}, name="127.0.0.1:9")
    model = np.full(nbytes, 0x5A, np.uint8)

    async def echo(req: Arrival) -> Any:
        return model

    app = build_app(auth_handlers({ROUTE: echo}, server), tap=server.tap, max_body_bytes=2 << 30)
    runner, port = await serve(app, "127.0.0.1", 0)
    server.name = addr = f"127.0.0.1:{port}"
    transport = AuthTransport(HttpTransport(max_response_bytes=2 << 30), client)
    out: dict[str, list[float]] = {"pre-hash": [], "trailer": [], "finish": [], "exchange": []}
    timed(StreamedSeal, "trailer", out["trailer"])
    # a receiver's digest skips the magic; a sender's (inside `trailer`) skips nothing
    timed(StreamDigest, "finish", out["finish"], only=lambda tap: tap.skip > 0)
    try:
        for r in range(rounds + 1):  # the first round warms the pool and the buffers
            t0 = time.perf_counter()
            client.seal_parts(ROUTE, model, to=addr)
            pre = time.perf_counter() - t0
            t0 = time.perf_counter()
            answer = await transport.request(addr, ROUTE, model, timeout=120)
            took = time.perf_counter() - t0
            assert len(answer) == nbytes
            if r == 0:
                for values in out.values():
                    values.clear()
                continue
            out["pre-hash"].append(pre)
            out["exchange"].append(took)
    finally:
        await transport.close()
        await runner.cleanup()
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mb", type=float, default=100.0, help="body size each way, MB")
    ap.add_argument("--rounds", type=int, default=9)
    args = ap.parse_args()
    out = asyncio.run(run(int(args.mb * 1e6), args.rounds))
    print(f"load average {os.getloadavg()[0]:.1f}; {args.mb:g} MB each way, {args.rounds} rounds")
    for name, values in out.items():
        med = statistics.median(values) * 1e3
        print(f"{name:<9} n={len(values):<3} median {med:8.2f} ms  max {max(values) * 1e3:8.2f} ms")
    pre, tail = statistics.median(out["pre-hash"]), statistics.median(out["trailer"])
    ex = statistics.median(out["exchange"])
    print(
        f"per push-pull: v3 senders waited 2 x {pre * 1e3:.1f} ms before their first byte "
        f"({2 * pre / ex:.1%} of this exchange), v4 senders 2 x {tail * 1e3:.2f} ms after "
        f"their last ({2 * tail / ex:.1%})"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
