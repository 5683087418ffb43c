"""A sybil flood: `count` members under fresh keys of the attacker's own, each record validly
signed and kept beating, gossiped to a peer in digests and joined one by one.

Unbounded, a few dozen of them kept alive by gossip would take nearly every honest exchange
(docs/security.md, "How many identities one machine may bring"; the figures:
docs/benchmarks.md, "Hostile members and fuzzing"). Without admission (`--admission trust`, or
a secret the attacker lacks) none may be listed; with open admission, at most a source's burst,
then its rate. `listed_max`
(the most sybils any observed peer listed at once) is what the attack got: `accepted`.

From many addresses: with `sources` (local addresses to send from, e.g. 127.1.K.1:
on Linux all of 127.0.0.0/8 is the loopback's) the sybils are split among them, each source
gossiping and joining its own share from its own address, so a per-address cap binds each
share separately. With `listen`, each source also runs a listener that accepts connections and
never answers, and its sybils advertise it: an exchange or a gossip that picks one waits out its
whole deadline instead of failing at once (the discard port refuses the connection). With
`targets`, every peer it names is flooded, not only `addr`.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import math
import time
from collections.abc import Callable
from typing import Any

import aiohttp
from swarmnode.fault.hostile.speak import SENDER, Speaker, paced
from swarmnode.gossip.auth import PeerKey, Signer
from swarmnode.gossip.membership import (
    ALIVE,
    CHAIN_LENGTH,
    SUSPECT,
    Gossiped,
    RecordSigner,
    to_wire,
)
from swarmnode.gossip.wire import encode_control

BATCH = 256  # entries per digest: ~110 KB, well within a control message
SYBIL_ADDR = "127.0.0.1:9"  # the discard port: nobody answers there
LIVE_STATES = (ALIVE, SUSPECT)  # what the membership's caps count


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
        sources: list[str] | None = None,
        listen: bool = False,
        targets: Callable[[], list[str]] | None = None,
    ) -> None:
        self.addr, self.count, self.rate = addr, count, rate
        self.signer, self.observers, self.observe_every = signer, observers, observe_every
        self.sources = list(sources or [])  # local addresses to send from ([]: the default)
        self.listen = listen
        self.targets = targets  # every peer to flood (None: `addr` only)
        self.ready_s = 0.0
        self.listed_max = 0  # the most sybils one observed peer listed at once
        self.held = 0  # connections the silent listeners accepted (and never answered)
        self.statuses: dict[str, int] = {}
        self._signers: list[RecordSigner] = []
        self._shares: list[tuple[str | None, list[RecordSigner], str]] = []
        self._sent: list[int] = []  # messages each source has sent

    async def run(self, seconds: float) -> None:
        """Make the keys and sign the records, then flood for `seconds`. The keys and records
        come first, outside the window: an attacker has them ready, and on a busy box making
        500 took most of a 10 s window (a chaos run then measured 4 messages where its rate
        promised 10). Each record's chain covers only the heartbeats the window holds: 1,024
        links a sybil were 2 million SHA-256 in the runner's own process, which under load
        took the whole run (the attacker sent nothing)."""
        started = time.monotonic()
        async with contextlib.AsyncExitStack() as stack:
            adverts = [await self._listener(stack, src) for src in self.sources or [None]]
            beats = math.ceil(self.rate * seconds) + 1  # heartbeats 1.. of the messages
            self._signers = await asyncio.to_thread(_make_signers, self.count, beats)
            ids = {s.key.peer_id for s in self._signers}
            n = len(adverts)
            speakers = []
            for k, src in enumerate(self.sources or [None]):
                connector = aiohttp.TCPConnector(local_addr=(src, 0)) if src else None
                session = await stack.enter_async_context(
                    aiohttp.ClientSession(connector=connector)
                )
                speakers.append(Speaker(session, self.signer))
                self._shares.append((src, self._signers[k::n], adverts[k]))
            self._sent = [0] * n
            await asyncio.to_thread(self._beat_all, 0)  # the records signed before the window
            self.ready_s = time.monotonic() - started
            try:
                await paced(
                    self.rate,
                    seconds,
                    lambda i: self._send(speakers, i),
                    self.observe_every,
                    lambda: self._observe(speakers[0], ids),
                )
            finally:
                total: dict[str, int] = {}
                for sp in speakers:
                    for key, v in sp.statuses.items():
                        total[key] = total.get(key, 0) + v
                self.statuses = total

    async def _listener(self, stack: contextlib.AsyncExitStack, src: str | None) -> str:
        """The address a source's sybils advertise: a silent listener on it (`listen`), else
        the discard port."""
        if not self.listen:
            return SYBIL_ADDR
        host = src or "127.0.0.1"
        held: set[asyncio.StreamWriter] = set()

        async def accept(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            self.held += 1
            held.add(writer)  # never read, never answered: closed when the attack ends

        server = await asyncio.start_server(accept, host, 0)
        port = server.sockets[0].getsockname()[1]

        async def close() -> None:
            server.close()
            for w in held:
                w.close()
            with contextlib.suppress(Exception):
                await asyncio.wait_for(server.wait_closed(), 1.0)

        stack.push_async_callback(close)
        return f"{host}:{port}"

    async def _send(self, speakers: list[Speaker], i: int) -> None:
        """One message from every source, at once: its sybils' digest and one join."""
        # each message beats every sybil (a new heartbeat on its chain: they stay alive)
        shares = await asyncio.to_thread(self._beat_all, i + 1)
        await asyncio.gather(
            *(
                self._send_share(k, sp, entries, i)
                for k, (sp, entries) in enumerate(zip(speakers, shares, strict=True))
            )
        )

    def _beat_all(self, hb: int) -> list[list[list[Any]]]:
        """Every source's share at heartbeat `hb`, in wire form (a worker thread's job)."""
        return [_beat(signers, hb, advert) for _, signers, advert in self._shares]

    async def _send_share(self, k: int, speaker: Speaker, entries: list[list[Any]], i: int) -> None:
        if not entries:
            return
        joiner = entries[i % len(entries)]
        digests = [
            encode_control("gossip", sender=SENDER, members=entries[start : start + BATCH])
            for start in range(0, len(entries), BATCH)
        ]
        join = encode_control("join", member=joiner)
        # the targets one after another, each answer awaited, as before: all at once (tried),
        # the flood sent more under load and the swarm's rounds fell to 0.17 and 0.44 of the
        # control's in 2 of 11 loaded runs (docs/benchmarks.md, "The suite")
        for addr in self.targets() if self.targets is not None else [self.addr]:
            for body in digests:
                await speaker.post(addr, "gossip", body)
            await speaker.post(addr, "join", join)  # one of them asks to join, as a newcomer
        self._sent[k] += 1  # per source: a source cut at the window's end hides no other

    async def _observe(self, speaker: Speaker, ids: set[str]) -> None:
        for addr in self.observers():
            members = await speaker.members(addr)
            if members is not None:
                # live ones only, as the caps count them: a tombstone is never sampled, and
                # under load sybils that miss their beats die and free their seats for others
                # (145 listed of a cap of 128 once, counting the dead)
                listed = sum(
                    m.get("peer_id") in ids and m.get("state") in LIVE_STATES for m in members
                )
                self.listed_max = max(self.listed_max, listed)

    def report(self) -> dict[str, Any]:
        return {
            "sybils": self.count,
            "sources": len(self.sources) or 1,
            "held": self.held,
            "ready_s": round(self.ready_s, 3),  # keys made and records signed, before the window
            "messages": min(self._sent, default=0),  # that every source sent
            "sent": sum(self._sent),  # one source's digests and join to every target: a message
            "statuses": self.statuses,
            "listed_max": self.listed_max,
            "accepted": self.listed_max,
        }


def _make_signers(count: int, beats: int) -> list[RecordSigner]:
    """Fresh keys whose chains cover `beats` heartbeats (a worker thread's job)."""
    length = max(1, min(beats, CHAIN_LENGTH))
    return [
        RecordSigner(PeerKey.generate(), clock=lambda: 0.0, chain_length=length)
        for _ in range(count)
    ]


def _beat(signers: list[RecordSigner], hb: int, addr: str = SYBIL_ADDR) -> list[list[Any]]:
    return [
        to_wire(s.entry(Gossiped(s.key.peer_id, addr, 1, hb, "alive", 0.0, {}))) for s in signers
    ]


def source_addresses(net: str, count: int) -> list[str]:
    """`count` addresses of `net` to send from: one per /24 (x.y.K.1) when `net` is wider than
    a /24 (an attacker spread over many prefixes), else consecutive hosts of the one /24."""
    network = ipaddress.ip_network(net, strict=False)
    if network.version == 4 and network.prefixlen < 24:
        subnets = network.subnets(new_prefix=24)
        out = [str(next(iter(s.hosts()))) for _, s in zip(range(count), subnets, strict=False)]
    else:
        out = [str(h) for _, h in zip(range(count), network.hosts(), strict=False)]
    if len(out) < count:
        raise ValueError(f"{net} holds fewer than {count} source addresses")
    return out
