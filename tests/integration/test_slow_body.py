"""Slow bodies against a real peer (issue 10): honest exchanges go on at full rate.

Before: 4 connections trickling a 19 KB `pushpull`/`params` body at one byte per 2 s took the 4
admission slots before any byte was read or authenticated; the victim served 2 exchanges in 20 s
instead of ~240, with or without a secret. Here an in-process `Node` with a swarm secret is
attacked by 100 such connections (swarmnode.fault.hostile.SlowBodies, reconnecting whenever cut) while
an honest peer's signed exchanges are timed against the same peer unattacked, in alternating
windows (the box is shared: alternation cancels slow drifts in its load).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator

import numpy as np
import pytest
from swarmnode.fault.hostile import SlowBodies
from swarmnode.fault.hostile.insider import admit
from swarmnode.gossip.auth.transport import AuthTransport
from swarmnode.gossip.errors import TransportError
from swarmnode.gossip.wire import frames as wire
from swarmnode.gossip.wire.control import encode_control
from swarmnode.node.net.transport import HttpTransport
from swarmnode.node.peer.node import Node
from swarmnode.node.settings import PeerConfig

from tests.integration.member_client import MemberClient
from tests.waiting import eventually

pytestmark = pytest.mark.timeout(120)

SECRET = "s"
WINDOW_S = 1.5
ROUNDS = 3


@pytest.fixture
async def victim() -> AsyncIterator[Node]:
    cfg = PeerConfig(
        model="mlp:128",  # a 38 KB frame: the 19 KB slow bodies are within the pushpull cap
        steps=0,
        listen="127.0.0.1:0",
        eval_every=10**6,
        secret=SECRET,
        # Longer than an attack window: what is measured is that an undelivered body holds no
        # slot, not how cheap a cut-off is (test_intake.py cuts them; in one process the
        # attacker's reconnects would compete with the honest peer for the same event loop).
        body_grace_s=5.0,
    )
    node = await Node.create(cfg)
    try:
        assert await asyncio.to_thread(node.worker.stop, 30.0)  # a frozen model: mixes inline
        yield node
    finally:
        await node.close()


class Honest:
    """A peer of the swarm exchanging with the victim as fast as it answers, one at a time."""

    def __init__(self, victim: Node) -> None:
        self.victim = victim
        self.member = MemberClient(SECRET)  # a member: its model requests carry its signature
        self.transport = AuthTransport(HttpTransport(), self.member.signer)
        size, me = victim.store.size, self.member.peer_id
        self.push = bytes(wire.encode_params(np.zeros(size, np.float32), sender=me, step=1))
        self.pull = encode_control("pull", sender=me)
        self.failed: list[str] = []

    async def window(self, seconds: float) -> int:
        """Exchanges completed in `seconds` (a push-pull and a pull, alternately)."""
        done, end = 0, time.monotonic() + seconds
        while time.monotonic() < end:
            route, body = ("pushpull", self.push) if done % 2 == 0 else ("params", self.pull)
            try:
                await self.transport.request(self.victim.addr, route, body, timeout=5.0)
            except TransportError as exc:
                self.failed.append(f"{route}: {exc}")
                continue
            done += 1
        return done


async def test_100_slow_bodies_hold_no_slot_and_every_honest_exchange_is_served(victim):
    """In one process the attacker's 100 connections share the event loop (and the GIL) with
    the victim and the honest peer, so the rate bound here is loose (25%: before the fix it
    was ~0, every honest request refused 503; 50% failed once at 46% with the other xdist
    worker's peers on the same 2 cores); the 90% bound is checked with the attacker in a
    process of its own against a `swarmnode start` peer (test_slow_body_processes.py)."""
    honest = Honest(victim)
    admit(victim, honest.member)
    try:
        await honest.window(0.5)  # warm the pool and the code paths
        base, attacked = 0, 0
        peak = 0
        for _ in range(ROUNDS):
            base += await honest.window(WINDOW_S)
            async with SlowBodies(victim.addr, 100) as slow:
                await eventually(lambda: slow.open >= 90, 10, "the slow connections to open")
                attacked += await honest.window(WINDOW_S)
            peak = max(peak, slow.peak)
        assert honest.failed == []  # not one honest request refused or timed out
        assert peak >= 90  # the attack really was on (nearly all 100 connections at once)
        assert attacked >= 0.25 * base, f"{attacked} exchanges under attack vs {base} without"
    finally:
        await honest.transport.close()
