"""The client side of joining and leaving, mixed into `Membership` (membership.py)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from swarmnode.gossip.errors import CodecError, JoinTimeout, MembershipError, TransportError
from swarmnode.gossip.membership.failure import ALIVE, SUSPECT
from swarmnode.gossip.membership.records import to_wire
from swarmnode.gossip.wire.control import decode_control, encode_control

if TYPE_CHECKING:
    from swarmnode.gossip.membership.views import Member

log = logging.getLogger(__name__)


class JoinLeave:
    """Join through seeds, announce a leave. Uses `Membership`'s table, transport and config."""

    if TYPE_CHECKING:  # provided by Membership
        cfg: Any
        table: Any
        transport: Any
        rng: Any
        self_id: str
        addr: str

        def _merge(self, msg: Any, what: str, source: str, solicited: bool = False) -> bool: ...
        def _clock(self) -> float: ...
        async def _stop_tasks(self) -> None: ...

    async def join(self, seeds: Sequence[str], timeout: float) -> None:
        """Join through any of `seeds` ("host:port"), retrying with backoff until `timeout`.

        Seeds equal to our own address are skipped; with none left we start a new swarm.
        Raises `JoinTimeout` when no seed answers in time.
        """
        others = [s for s in dict.fromkeys(seeds) if s != self.addr]
        if not others:
            log.info("%s: no seed other than myself: starting a new swarm", self.self_id)
            return
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        first = self.rng.randrange(len(others))
        errors: dict[str, str] = {}
        attempt = 0
        while (remaining := deadline - loop.time()) > 0:
            seed = others[(first + attempt) % len(others)]
            try:
                await self._join_via(seed, min(self.cfg.join_attempt_timeout, remaining))
                return
            except (TransportError, CodecError) as exc:
                status = getattr(exc, "status", None)
                if status in (401, 403):
                    # retrying cannot fix a wrong or missing secret: say so now, not at timeout
                    raise MembershipError(
                        f"could not join via {seed}: refused ({exc}); check the swarm `secret`"
                    ) from None
                if status == 409:  # nor can it make two peers' ids differ
                    raise MembershipError(
                        f"could not join via {seed}: {exc}; give this peer another `peer_id`"
                    ) from None
                errors[seed] = f"{type(exc).__name__}: {exc}"
                log.debug("%s: join via %s failed: %s", self.self_id, seed, exc)
            attempt += 1
            if attempt % len(others) == 0:  # a full pass failed: back off before the next
                pause = min(self._backoff(attempt // len(others)), deadline - loop.time())
                await asyncio.sleep(max(0.0, pause))
        detail = "; ".join(f"{s}: {why}" for s, why in errors.items()) or "no attempt completed"
        raise JoinTimeout(
            f"could not join: no seed of {', '.join(others)} answered within {timeout:g} s "
            f"({detail})"
        )

    def _backoff(self, passes: int) -> float:
        base = self.cfg.join_backoff * 2 ** (passes - 1)
        return min(self.cfg.join_backoff_max, base) * self.rng.uniform(0.5, 1.0)

    async def _join_via(self, seed: str, timeout: float) -> None:
        body = encode_control("join", member=to_wire(self.table.self_entry()))
        answer = await self.transport.request(seed, "join", body, timeout=timeout)
        # we asked this seed (the operator named it): its table is exempt from newcomer rates
        ack = decode_control(answer, "join-ack")
        if self._merge(ack, f"join answer of {seed}", seed, solicited=True):
            # The seed still had a tombstone of us (we restarted): it ignored our entry.
            # Tell it our refuted incarnation now, so it spreads us at once; best effort.
            body = encode_control("join", member=to_wire(self.table.self_entry()))
            try:
                await self.transport.request(seed, "join", body, timeout=timeout)
            except TransportError as exc:
                log.info("%s: second join to %s failed: %s", self.self_id, seed, exc)
        log.info("%s: joined through %s; %d members known", self.self_id, seed, len(self.table))

    async def leave(self) -> int:
        """Announce that we leave to every live peer (in parallel, best effort), and stop
        gossiping. Returns how many acknowledged. Idempotent."""
        if self.table.leaving:
            return 0
        self.table.leaving = True
        await self._stop_tasks()
        peers = self.table.members(self._clock(), (ALIVE, SUSPECT))
        body = encode_control("leave", member=to_wire(self.table.self_entry()))
        acks = await asyncio.gather(*(self._announce_leave(m, body) for m in peers))
        level = logging.INFO if peers else logging.DEBUG  # alone: nobody to tell
        log.log(level, "%s: left; %d of %d peers acknowledged", self.self_id, sum(acks), len(peers))
        return sum(acks)

    async def _announce_leave(self, peer: Member, body: bytes) -> bool:
        try:
            await self.transport.request(peer.addr, "leave", body, timeout=self.cfg.leave_timeout)
            return True
        except TransportError as exc:
            log.debug("%s: leave announcement to %s failed: %s", self.self_id, peer.peer_id, exc)
            return False
