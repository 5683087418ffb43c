"""How a hostile actor talks to peers: one POST of a protocol message (sealed with the swarm
secret when the attacker holds it: an insider), status reads, and a paced loop.

Nothing here raises for a peer's answer or failure: an attacker counts what it got and goes on.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import time
from collections.abc import Awaitable, Callable
from typing import Any

import aiohttp
from swarmnode.gossip.auth import Signer, nonce_of
from swarmnode.gossip.errors import AuthError, CodecError
from swarmnode.gossip.wire import decode_control, encode_control

TIMEOUT_S = 3.0
SENDER = "hostile"


class Speaker:
    """One attacker's HTTP client; `statuses` counts the answers by route and HTTP status (0:
    no answer)."""

    def __init__(self, session: aiohttp.ClientSession, signer: Signer | None) -> None:
        self.session, self.signer = session, signer
        self.statuses: collections.Counter[str] = collections.Counter()

    async def post(self, addr: str, route: str, body: bytes) -> tuple[int, bytes]:
        """(HTTP status, answer opened with the secret if we hold it); (0, b"") on no answer.
        A signer with a member key and no secret (an open swarm's insider) seals only the
        routes it signs."""
        nonce = b""
        wrapped = self.signer is not None and self.signer.wraps(route)
        if wrapped:
            sealed = self.signer.seal(route, body, to=addr)
            nonce, body = nonce_of(sealed), bytes(sealed)
        try:
            async with self.session.post(
                f"http://{addr}/v1/{route}",
                data=body,
                timeout=aiohttp.ClientTimeout(total=TIMEOUT_S),
            ) as resp:
                status, data = resp.status, await resp.read()
        except (asyncio.TimeoutError, aiohttp.ClientError, OSError):
            status, data = 0, b""
        self.statuses[f"{route} {status}"] += 1
        if status == 200 and wrapped and self.signer.has_secret:  # bare answers without one
            try:
                data = bytes(self.signer.open(route, data, reply_to=nonce))
            except AuthError:
                data = b""
        return status, data

    async def digest_of(self, addr: str) -> list[Any]:
        """The member entries `addr` gossips back to an empty digest (what any member learns)."""
        body = encode_control("gossip", sender=SENDER, members=[])
        status, data = await self.post(addr, "gossip", body)
        if status != 200:
            return []
        try:
            members = decode_control(data, "gossip-ack").get("members")
        except CodecError:
            return []
        return members if isinstance(members, list) else []

    async def members(self, addr: str) -> list[dict[str, Any]] | None:
        """`addr`'s `/v1/status` member list, or None when it does not answer."""
        try:
            async with self.session.get(
                f"http://{addr}/v1/status", timeout=aiohttp.ClientTimeout(total=TIMEOUT_S)
            ) as resp:
                if resp.status != 200:
                    return None
                status = await resp.json()
        except (asyncio.TimeoutError, aiohttp.ClientError, OSError, ValueError):
            return None
        members = status.get("members") if isinstance(status, dict) else None
        return [m for m in members if isinstance(m, dict)] if isinstance(members, list) else None


LAST_LOOK_S = 2.0  # the final observation of an actor cancelled at the end of a run


async def paced(
    rate: float,
    seconds: float,
    step: Callable[[int], Awaitable[None]],
    observe_every: float,
    observe: Callable[[], Awaitable[None]],
) -> None:
    """Call `step(i)` `rate` times a second for `seconds`, and `observe()` every `observe_every`
    s in a task of its own (a step that runs past the window still leaves its observations) and
    once at the end, also when cancelled. Steps never overlap: one that runs late delays the
    next; the one still running at the window's end is cut there."""
    start = time.monotonic()
    end = start + seconds
    looking = asyncio.create_task(_every(observe_every, observe), name="hostile-observe")
    try:
        i = 0
        while (left := end - time.monotonic()) > 0:
            try:
                await asyncio.wait_for(step(i), left)
            except asyncio.TimeoutError:
                break
            i += 1
            delay = min(start + i / rate, end) - time.monotonic()
            if delay > 0:
                await asyncio.sleep(delay)
    finally:
        looking.cancel()
        (looked,) = await asyncio.gather(looking, return_exceptions=True)
        if isinstance(looked, Exception):  # an observer's bug must not pass silently
            raise looked
        # what the attack left behind; bounded, as a cancelled run is ending
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(observe(), LAST_LOOK_S)


async def _every(seconds: float, observe: Callable[[], Awaitable[None]]) -> None:
    while True:
        await asyncio.sleep(seconds)
        await observe()
