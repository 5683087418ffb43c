"""A swarm of `Membership`s on the in-memory network and a fake clock, for the membership tests."""

from __future__ import annotations

import asyncio
import random
from collections.abc import Callable

from swarmnode.gossip.link.inmemory import InMemoryNetwork
from swarmnode.gossip.membership.service import Membership, MembershipConfig

CFG = MembershipConfig()  # the defaults: interval 0.5 s, fanout 3, suspect 1.5 s, dead 2.5 s
FAST = MembershipConfig(
    gossip_interval=0.05,
    suspect_after=0.25,
    dead_after=0.5,
    tombstone_ttl=5.0,
    request_timeout=0.3,
    leave_timeout=0.3,
)


class FakeClock:
    def __init__(self, start: float = 1000.0) -> None:
        self.t = start

    def __call__(self) -> float:
        return self.t

    def advance(self, dt: float) -> None:
        self.t += dt


class Swarm:
    """Peers on one in-memory network. `round()` is one gossip interval of virtual time."""

    def __init__(self, cfg: MembershipConfig = CFG, clock: Callable[[], float] | None = None):
        self.net = InMemoryNetwork()
        self.cfg = cfg
        self.fake = FakeClock() if clock is None else None
        self.clock = clock or self.fake
        self.peers: dict[str, Membership] = {}

    def add(self, i: int, incarnation: int = 1, addr: str | None = None) -> Membership:
        addr = addr or f"10.0.0.{i}:7070"
        m = Membership(
            f"p{i}",
            addr,
            self.net.transport(addr),
            self.cfg,
            incarnation=incarnation,
            clock=self.clock,
            rng=random.Random(i),
        )
        self.net.register(addr, m.handlers())
        self.peers[m.self_id] = m
        return m

    def crash(self, peer_id: str) -> Membership:
        """The peer vanishes: no more answers, no more rounds (like SIGKILL)."""
        m = self.peers.pop(peer_id)
        self.net.unregister(m.addr)
        return m

    async def join_all(self, n: int) -> list[Membership]:
        ms = [self.add(i) for i in range(n)]
        for m in ms[1:]:
            await m.join([ms[0].addr], timeout=5.0)
        return ms

    async def round(self) -> None:
        for m in list(self.peers.values()):
            if not m.table.leaving:
                await m.gossip_round()
        self.fake.advance(self.cfg.gossip_interval)

    async def rounds_until(self, cond: Callable[[], bool], limit: int) -> int:
        for r in range(limit + 1):
            if cond():
                return r
            await self.round()
        raise AssertionError(f"condition not reached within {limit} rounds")

    def state_everywhere(self, peer_id: str) -> set[str | None]:
        views = [m.get(peer_id) for pid, m in self.peers.items() if pid != peer_id]
        return {None if v is None else v.state for v in views}

    def converged(self) -> bool:
        n = len(self.peers)
        return all(len(m.live_peers()) == n - 1 for m in self.peers.values())


async def close_all(ms: list[Membership]) -> None:
    await asyncio.gather(*(m.close() for m in ms))
