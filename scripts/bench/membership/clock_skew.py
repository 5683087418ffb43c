"""A member whose clock jumps after it joined: rounds applied before and after the jump.

Three in-process peers (`mlp:8`, paced by --slowdown); once all see each other alive, the
rounds each applies over `--window` seconds, then peer c's wall clock jumps `--jump` seconds
ahead and the same window is counted again. Two arms in the same run, so that the box's load
is the same for both: `30 s` judges envelopes as before (refused beyond 30 s of this peer's
clock: `max_offset` = `max_skew`), `sender` against the sender's own clock as measured here
(gossip/auth/replay.py, tolerated up to 300 s). Each arm with the swarm secret (every message
enveloped) and without (only the exchange's requests are: gossip travels bare, which kept the
skewed member listed alive).

    .venv/bin/python scripts/bench/membership/clock_skew.py [--window 15] [--jump 90]
    .venv/bin/python scripts/bench/membership/clock_skew.py --guard-cost  # one check, new rule/old
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import time
from typing import Any

from swarmnode.gossip.auth.replay import ReplayGuard
from swarmnode.node.peer.node import Node
from swarmnode.node.settings import PeerConfig

BASE: dict[str, Any] = {
    "model": "mlp:8",
    "steps": 0,
    "listen": "127.0.0.1:0",
    "eval_every": 10**6,
    "slowdown": 20.0,
}


async def _alive(nodes: list[Node], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while any(len(n.membership.live_peers()) < len(nodes) - 1 for n in nodes):
        if time.monotonic() > deadline:
            raise TimeoutError("the peers never all saw each other alive")
        await asyncio.sleep(0.2)


async def _applied_over(nodes: list[Node], window: float) -> list[int]:
    start = [n.exchanger.rounds_applied for n in nodes]
    await asyncio.sleep(window)
    return [n.exchanger.rounds_applied - s for n, s in zip(nodes, start, strict=True)]


async def arm(plain: bool, secret: str | None, window: float, jump: float) -> dict[str, Any]:
    nodes: list[Node] = []
    try:
        for name in ("a", "b", "c"):
            join = [nodes[0].addr] if nodes else []
            cfg = PeerConfig(**{**BASE, "secret": secret, "join": join, "name": name})
            nodes.append(await Node.create(cfg))
            if plain:  # the old rule: nothing beyond the 30 s window
                nodes[-1].signer.guard.max_offset = nodes[-1].signer.guard.max_skew
        await _alive(nodes, 30)
        before = await _applied_over(nodes, window)
        c = nodes[2]
        c.signer.clock = c.signer.guard.clock = lambda: time.time() + jump
        after = await _applied_over(nodes, window)
        alive = [m.peer_id == c.peer_id for m in nodes[0].membership.live_peers()]
        return {"before": before, "after": after, "c_alive_at_a": any(alive)}
    finally:
        for n in reversed(nodes):
            await n.close()


def guard_cost(n: int = 100_000, signers: int = 8) -> None:
    """Seconds per check of n fresh envelopes: a signed sender's (anchor, quota) against the
    plain 30 s check, in turns, three times."""
    nonces = [os.urandom(16) for _ in range(n)]
    names = [f"peer{i}" for i in range(signers)]
    for _ in range(3):
        took = []
        for signed in (False, True):
            guard, now, t0 = ReplayGuard(), time.time(), time.perf_counter()
            for i, nonce in enumerate(nonces):
                if signed:
                    guard.check(now, nonce, sender=names[i % signers], signed=True)
                else:
                    guard.check(now, nonce)
            took.append((time.perf_counter() - t0) / n)
        print(f"plain {took[0] * 1e6:.2f} us, signed sender {took[1] * 1e6:.2f} us: "
              f"{took[1] / took[0]:.2f} x")  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--window", type=float, default=15.0, help="seconds counted each side")
    ap.add_argument("--jump", type=float, default=90.0, help="seconds c's clock jumps ahead")
    ap.add_argument("--guard-cost", action="store_true", help="time the replay guard only")
    args = ap.parse_args()
    if args.guard_cost:
        guard_cost()
        return
    logging.basicConfig(level=logging.ERROR)
    print(f"rounds applied in {args.window:g} s, before / after c's clock jumps {args.jump:+g} s")
    for secret in ("s", None):
        for plain in (True, False):
            r = asyncio.run(arm(plain, secret, args.window, args.jump))
            rule = "30 s window" if plain else "sender's clock"
            cells = "  ".join(
                f"{name} {b:3d} / {a:3d}"
                for name, b, a in zip("abc", r["before"], r["after"], strict=True)
            )
            ratio = r["after"][2] / max(1, r["before"][2])
            print(
                f"secret={'yes' if secret else 'no ':3s} {rule:15s} {cells}   "
                f"c after/before {ratio:.2f}   c listed alive at a: {r['c_alive_at_a']}"
            )


if __name__ == "__main__":
    main()
