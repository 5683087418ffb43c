"""A sybil flood: `count` members under fresh keys of the attacker's own, each record validly
signed and kept beating, gossiped to a peer in digests and joined one by one (issue 10).

Before issue 10, 50 of them kept alive by gossip cut the honest exchange rate from ~275 to 3-8
in 20 s, and 2,000 to 0. Without admission (`--admission trust`, or a secret the attacker lacks)
none may be listed; with open admission, at most a source's burst, then its rate. `listed_max`
(the most sybils any observed peer listed at once) is what the attack got: `accepted`.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

import aiohttp
from swarmnode.fault.hostile.speak import SENDER, Speaker, paced
from swarmnode.gossip.auth.peer_key import PeerKey
from swarmnode.gossip.auth.signer import Signer
from swarmnode.gossip.membership.entries import Gossiped
from swarmnode.gossip.membership.records import RecordSigner, to_wire
from swarmnode.gossip.wire.control import encode_control

BATCH = 256  # entries per digest: ~110 KB, well within a control message
SYBIL_ADDR = "127.0.0.1:9"  # the discard port: nobody answers there


class SybilFlood:
    kind = "sybil-flood"

    def __init__(
        self,
        addr: str,
        count: int,
        rate: float,
        *,
        signer: Signer | None = None,
        observers: Callable[[], list[str]] = list,
        observe_every: float = 1.0,
    ) -> None:
        self.addr, self.count, self.rate = addr, count, rate
        self.signer, self.observers, self.observe_every = signer, observers, observe_every
        self.messages = 0
        self.listed_max = 0  # the most sybils one observed peer listed at once
        self.statuses: dict[str, int] = {}
        self._signers: list[RecordSigner] = []

    async def run(self, seconds: float) -> None:
        """Make the keys, then flood for `seconds`. The keys come first, outside the window: an
        attacker has them ready, and on a busy box making 500 took most of a 10 s window (a
        chaos run then measured 4 messages where its rate promised 10)."""
        self._signers = await asyncio.to_thread(_make_signers, self.count)
        ids = {s.key.peer_id for s in self._signers}
        end = time.monotonic() + seconds
        async with aiohttp.ClientSession() as session:
            speaker = Speaker(session, self.signer)
            try:
                await paced(
                    self.rate,
                    max(0.0, end - time.monotonic()),
                    lambda i: self._send(speaker, i),
                    self.observe_every,
                    lambda: self._observe(speaker, ids),
                )
            finally:
                self.statuses = dict(speaker.statuses)

    async def _send(self, speaker: Speaker, i: int) -> None:
        # each message beats every sybil (a new heartbeat on its chain: they stay alive) ...
        entries = await asyncio.to_thread(_beat, self._signers, i + 1)
        for start in range(0, len(entries), BATCH):
            body = encode_control("gossip", sender=SENDER, members=entries[start : start + BATCH])
            await speaker.post(self.addr, "gossip", body)
        # ... and one of them asks to join, as a newcomer would
        joiner = entries[i % len(entries)]
        await speaker.post(self.addr, "join", encode_control("join", member=joiner))
        self.messages += 1

    async def _observe(self, speaker: Speaker, ids: set[str]) -> None:
        for addr in self.observers():
            members = await speaker.members(addr)
            if members is not None:
                listed = sum(m.get("peer_id") in ids for m in members)
                self.listed_max = max(self.listed_max, listed)

    def report(self) -> dict[str, Any]:
        return {
            "sybils": self.count,
            "messages": self.messages,
            "statuses": self.statuses,
            "listed_max": self.listed_max,
            "accepted": self.listed_max,
        }


def _make_signers(count: int) -> list[RecordSigner]:
    """Fresh keys, each with its record signed and its chain drawn (1,024 SHA-256 a key: a
    worker thread's job)."""
    signers = [RecordSigner(PeerKey.generate(), clock=lambda: 0.0) for _ in range(count)]
    _beat(signers, 0)
    return signers


def _beat(signers: list[RecordSigner], hb: int) -> list[list[Any]]:
    return [
        to_wire(s.entry(Gossiped(s.key.peer_id, SYBIL_ADDR, 1, hb, "alive", 0.0, {})))
        for s in signers
    ]
