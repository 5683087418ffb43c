"""Membership under attack (issue 10), and what signatures cost on the gossip path.

    .venv/bin/python scripts/bench/membership/hostile.py [--members 16] [--rounds 400]

1. gossip-path CPU, unsigned vs signed: two tables of `--members` members exchange digests
   every round (each member's heartbeat advancing, so every record is re-signed by its owner
   and verified once by the receiver): encode, decode, parse, admit, verify, merge.
2. a real peer (`Node` on 127.0.0.1) flooded with 100,000 entries in 50 messages of 2,000
   (unsigned, forged, validly signed under 400 keys): table size, RSS, /v1/status time.
The attacks themselves are asserted in tests/integration/test_hostile_members.py.
"""

from __future__ import annotations

import argparse
import asyncio
import resource
import time

import aiohttp
from swarmnode.gossip.auth.peer_key import PeerKey
from swarmnode.gossip.link.inmemory import InMemoryNetwork
from swarmnode.gossip.membership.entries import Gossiped
from swarmnode.gossip.membership.records import seal, to_wire
from swarmnode.gossip.membership.service import Membership, MembershipConfig
from swarmnode.gossip.wire.control import decode_control, encode_control
from swarmnode.node.peer.node import Node
from swarmnode.node.settings import PeerConfig


def gossip_cpu(n: int, rounds: int, signed: bool) -> float:
    """CPU seconds per round spent by a receiver on one digest of `n` fresh records."""
    keys = [PeerKey.generate() for _ in range(n)]
    me = PeerKey.generate()
    m = Membership(
        me.peer_id if signed else "me",
        "10.0.0.1:1",
        InMemoryNetwork().transport("10.0.0.1:1"),
        MembershipConfig(),
        key=me if signed else None,
    )
    total = 0.0
    for r in range(rounds):
        t0 = time.process_time()
        entries = []
        for i, k in enumerate(keys):  # each owner signs its own bumped record once
            g = Gossiped(
                k.peer_id if signed else f"p{i}", f"10.1.0.{i}:1", 1, r + 1, "alive", 0.0, {}
            )
            entries.append(to_wire(seal(g, k) if signed else g))
        body = encode_control("gossip", sender="x", members=entries)
        m._merge(decode_control(body, "gossip"), "gossip", "10.1.0.0")
        total += time.process_time() - t0
    return total / rounds


async def flood() -> dict[str, float]:
    node = await Node.create(
        PeerConfig(model="mlp:8", steps=0, listen="127.0.0.1:0", eval_every=10**6, slowdown=4.0)
    )
    rss0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    signers = [PeerKey.generate() for _ in range(400)]
    worst = 0.0
    try:
        async with aiohttp.ClientSession() as http:
            for i in range(50):
                if i % 3 == 0:
                    raw = [
                        [f"f{i}-{j}", "127.0.0.1:9", 1, 1, "alive", 0.0, {}] for j in range(2000)
                    ]
                elif i % 3 == 1:
                    g = Gossiped(f"x{i}", "127.0.0.1:9", 1, 1, "alive", 0.0, {})
                    raw = [
                        to_wire(seal(g._replace(peer_id=f"x{i}-{j}"), signers[0]))
                        for j in range(2000)
                    ]
                else:
                    raw = [
                        to_wire(
                            seal(
                                Gossiped(
                                    signers[j % 400].peer_id, "127.0.0.1:9", 1, i, "alive", 0.0, {}
                                ),
                                signers[j % 400],
                            )
                        )
                        for j in range(2000)
                    ]
                body = encode_control("gossip", sender="flood", members=raw)
                t = time.perf_counter()
                async with http.post(f"http://{node.addr}/v1/gossip", data=body) as resp:
                    await resp.read()
                worst = max(worst, time.perf_counter() - t)
            t = time.perf_counter()
            async with http.get(f"http://{node.addr}/v1/status") as resp:
                status = await resp.json()
            status_s = time.perf_counter() - t
    finally:
        await node.close()
    rss1 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return {
        "members": len(status["members"]),
        "cap": node.membership.cfg.max_members,
        "status_s": status_s,
        "worst_message_s": worst,
        "rss_before_mb": rss0,
        "rss_after_mb": rss1,
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--members", type=int, default=16)
    ap.add_argument("--rounds", type=int, default=400)
    args = ap.parse_args()
    plain = gossip_cpu(args.members, args.rounds, signed=False)
    signed = gossip_cpu(args.members, args.rounds, signed=True)
    print(
        f"gossip path, {args.members} fresh records a digest: unsigned {plain * 1e3:.3f} ms, "
        f"signed {signed * 1e3:.3f} ms (sign+verify); per 0.5 s interval at fanout 3 a peer "
        f"receives ~6 digests: {6 * signed / 0.5 * 100:.2f}% of a core signed, "
        f"{6 * plain / 0.5 * 100:.2f}% unsigned"
    )
    print("flood:", asyncio.run(flood()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
