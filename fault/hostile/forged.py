"""Forged records: every way an attacker who speaks the protocol (and may hold the swarm secret)
can lie about another peer, the victim, sent to a peer over and over.

Each message carries: the victim's real signed record, captured from gossip, with a `left` hint
(the "forged left" that signed records prevent); a `left`, an address hijack at
incarnation 2^62 and an overflow at 2^53 under the victim's id signed by the attacker's key; the
old unsigned 81-byte overflow at 2^64 - 1; records under made-up ids (not their key's); the
first captured record replayed (stale by then). The hijack also goes as a join, the `left` as a
leave. Every `observe_every` s each observer's `/v1/status` is read: an observation in which
the victim shows as left, at the attacker's address or at a forged incarnation, or lists a
made-up id, counts as `accepted` (the bar: 0).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import aiohttp
import msgpack
from swarmnode.fault.hostile.speak import SENDER, Speaker, paced
from swarmnode.gossip.auth import PeerKey, Signer
from swarmnode.gossip.membership import Gossiped, seal, to_wire
from swarmnode.gossip.wire import encode_control

HIJACK_ADDR = "127.0.0.1:6666"
FORGED_INCARNATION = 2**62
FAKE_IDS = 8


class ForgedRecords:
    kind = "forged-records"

    def __init__(
        self,
        addr: str,
        victim: str,
        rate: float,
        *,
        signer: Signer | None = None,
        observers: Callable[[], list[str]] = list,
        observe_every: float = 1.0,
    ) -> None:
        self.addr, self.victim, self.rate = addr, victim, rate
        self.signer, self.observers, self.observe_every = signer, observers, observe_every
        self.messages = 0
        self.captured = False  # whether gossip gave us the victim's real record
        self.observations = 0
        self.accepted = 0
        self.shown: list[str] = []  # what the accepted observations showed (the first few)
        self.statuses: dict[str, int] = {}
        self._key = PeerKey.generate()
        self._fake_ids = [f"forged{i:02d}{'x' * 8}" for i in range(FAKE_IDS)]

    async def run(self, seconds: float) -> None:
        async with aiohttp.ClientSession() as session:
            speaker = Speaker(session, self.signer)
            try:
                captured = await self._capture(speaker)
                lies = await asyncio.to_thread(self._forge, captured)
                await paced(
                    self.rate,
                    seconds,
                    lambda i: self._send(speaker, lies),
                    self.observe_every,
                    lambda: self._observe(speaker),
                )
            finally:
                self.statuses = dict(speaker.statuses)

    async def _capture(self, speaker: Speaker) -> list[Any] | None:
        for entry in await speaker.digest_of(self.addr):
            if _entry_id(entry) == self.victim:
                self.captured = True
                return list(entry)
        return None

    def _forge(self, captured: list[Any] | None) -> dict[str, list[Any]]:
        key, victim = self._key, self.victim

        def signed(peer_id: str, **kw: Any) -> list[Any]:
            g = Gossiped(
                peer_id,
                kw.get("addr", HIJACK_ADDR),
                kw.get("inc", 1),
                kw.get("hb", 1),
                "alive",
                0.0,
                {},
            )
            wire = to_wire(seal(g, key))
            wire[2] = kw.get("hint", "alive")  # relayer's hint: outside the signature
            return wire

        gossip = [
            signed(victim, hint="left", hb=10**6),
            signed(victim, inc=FORGED_INCARNATION),
            signed(victim, inc=2**53),
            [victim, HIJACK_ADDR, 2**64 - 1, 0, "alive", 0.0, {}],
            *(signed(fake) for fake in self._fake_ids),
        ]
        if captured is not None:
            left = list(captured)
            left[2] = "left"
            gossip += [left, list(captured)]  # the replay goes stale as the victim beats on
        return {
            "gossip": gossip,
            "join": signed(victim, inc=FORGED_INCARNATION),
            "leave": signed(victim, hint="left"),
        }

    async def _send(self, speaker: Speaker, lies: dict[str, list[Any]]) -> None:
        body = encode_control("gossip", sender=SENDER, members=lies["gossip"])
        await speaker.post(self.addr, "gossip", body)
        await speaker.post(self.addr, "join", encode_control("join", member=lies["join"]))
        await speaker.post(self.addr, "leave", encode_control("leave", member=lies["leave"]))
        self.messages += 1

    async def _observe(self, speaker: Speaker) -> None:
        for addr in self.observers():
            members = await speaker.members(addr)
            if members is None:
                continue
            self.observations += 1
            lies = [self._lie_shown(m) for m in members]
            shown = [lie for lie in lies if lie]
            if shown:
                self.accepted += 1
                self.shown = [*self.shown, f"{addr}: {shown[0]}"][:5]

    def _lie_shown(self, m: dict[str, Any]) -> str:
        peer_id = m.get("peer_id")
        if peer_id in self._fake_ids:
            return f"made-up id {peer_id} listed"
        if peer_id != self.victim:
            return ""
        inc = m.get("incarnation")
        if m.get("state") == "left":
            return "victim shown left"
        if m.get("addr") == HIJACK_ADDR:
            return "victim at the attacker's address"
        if isinstance(inc, int) and inc >= 2**53:
            return f"victim at incarnation {inc}"
        return ""

    def report(self) -> dict[str, Any]:
        return {
            "victim": self.victim,
            "captured": self.captured,
            "messages": self.messages,
            "statuses": self.statuses,
            "observations": self.observations,
            "accepted": self.accepted,
            "shown": self.shown,
        }


def _entry_id(entry: Any) -> str | None:
    """The peer id a wire entry speaks of (signed: inside its record; unsigned: field 0)."""
    if isinstance(entry, list) and len(entry) == 6 and isinstance(entry[0], bytes):
        try:
            fields = msgpack.unpackb(entry[0], raw=False, max_bin_len=4096, max_str_len=4096)
        except Exception:  # a peer's bytes: anything may be wrong with them
            return None
        return fields[0] if isinstance(fields, list) and fields else None
    return entry[0] if isinstance(entry, list) and entry else None
