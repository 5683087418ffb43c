"""What a peer reads from others, bounded: per-route body caps, the answer cap, peer sampling."""

from __future__ import annotations

import random
from collections.abc import Collection

from swarmnode.gossip.auth import MAX_OVERHEAD_BYTES as AUTH_ENVELOPE_BYTES
from swarmnode.gossip.link import BULK, MeasuringTransport, PartnerChoice, prefer_fast
from swarmnode.gossip.membership import ALIVE, SUSPECT, Membership, dialable, outbound_only
from swarmnode.gossip.wire import MAX_CONTROL_BYTES, max_frame_bytes
from swarmnode.node.net import IntakeLimits
from swarmnode.node.settings import PeerConfig


class MembershipPeers:
    """The exchange's `PeerDirectory` over membership: uniform over live peers, or (with
    `prefer_fast` > 0 and measured links) weighted towards quick links, never starving one;
    either way without the partners backed off after failed exchanges, and with at most about a
    third of a round's partners not proven by an answered exchange (gossip/link/partners.py:
    a flood of members that never answer, from many addresses, cannot take the rounds)."""

    def __init__(
        self,
        membership: Membership,
        rng: random.Random,
        links: MeasuringTransport | None = None,
        prefer_fast: float = 0.0,
    ) -> None:
        self.membership = membership
        self.rng = rng
        self.links = links
        self.prefer_fast = prefer_fast
        self.choice: PartnerChoice | None = None
        if links is not None:
            b = links.backoff
            self.choice = PartnerChoice(
                lambda a: b.proven(a, BULK), lambda a: b.streak(a, BULK) > 0, rng
            )

    def sample(self, k: int) -> list[tuple[str, str]]:
        return self._pick(self._dial_pool(), k)

    def sample_partners(
        self, k: int, awaitable: Collection[str]
    ) -> tuple[list[tuple[str, str]], list[str]]:
        """Up to k partners drawn uniformly over the dialable members and the outbound-only
        ones among `awaitable` (they pushed to me lately): (those to dial, as `sample` picks
        them, the outbound-only ids drawn, which a round awaits instead:
        gossip/exchange/awaited.py)."""
        pool = self._dial_pool()
        outbound = [
            m.peer_id
            for m in self.membership.live_peers()
            if outbound_only(m) and m.peer_id in awaitable
        ]
        total = len(pool) + len(outbound)
        drawn = sum(i >= len(pool) for i in self.rng.sample(range(total), min(k, total)))
        return self._pick(pool, k - drawn), self.rng.sample(outbound, drawn)

    def _dial_pool(self) -> list[tuple[str, str]]:
        """The live dialable members, less those whose last exchanges failed: they wait out
        their back-off (gossip/link/backoff.py), so members that never answer (sybils) cost a
        try per back-off, not a share of rounds."""
        live = [(m.peer_id, m.addr) for m in dialable(self.membership.live_peers())]
        if self.links is None:
            return live
        waiting = self.links.backoff.waiting
        return [(pid, addr) for pid, addr in live if not waiting(addr, BULK)]

    def _pick(self, live: list[tuple[str, str]], k: int) -> list[tuple[str, str]]:
        if k <= 0:
            return []
        if self.links is None or self.choice is None:
            return self.rng.sample(live, min(k, len(live)))
        fast = None
        if self.prefer_fast > 0:
            links, floor = self.links.links, self.prefer_fast

            def fast(pool: list[tuple[str, str]], n: int) -> list[tuple[str, str]]:
                return prefer_fast(pool, links, n, self.rng, floor=floor)

        return self.choice.pick(live, k, lambda c: c[1], fast)

    def is_member(self, peer_id: str) -> bool:
        """Whether `peer_id` may push its model to us: alive or merely suspect (a suspicion is
        a timing guess on a loaded host, not a verdict); dead, left and unknown ids may not."""
        m = self.membership.get(peer_id)
        return m is not None and m.state in (ALIVE, SUSPECT)

    def public_key(self, peer_id: str) -> bytes | None:
        """The key that must sign `peer_id`'s exchange requests (gossip.auth.signer): only a member's,
        taken from its own signed record, so no one can push or pull in another's name."""
        return self.membership.table.public_key(peer_id) if self.is_member(peer_id) else None


def body_caps(cfg: PeerConfig, n_params: int) -> dict[str, int]:
    """Per-route caps, checked before a body is read: only pushpull carries a model inbound,
    and never a larger one than ours; control routes never need more than a control message
    (plus its HMAC envelope)."""
    envelope = AUTH_ENVELOPE_BYTES if cfg.secret else 0
    return {
        "pushpull": min(int(cfg.max_body_mb * 2**20), max_frame_bytes(n_params)) + envelope,
        "*": MAX_CONTROL_BYTES + envelope,
    }


def answer_cap(cfg: PeerConfig, n_params: int) -> int:
    """What any answer may weigh: a model frame of our size at most (a lying peer cannot make
    us read 1 GiB), or a control message."""
    envelope = AUTH_ENVELOPE_BYTES if cfg.secret else 0
    return max(max_frame_bytes(n_params), MAX_CONTROL_BYTES) + envelope


def intake_limits(cfg: PeerConfig, n_params: int) -> IntakeLimits:
    """Delivery deadline and the byte budget of bodies in flight: room for every bulk slot of
    both bulk routes to hold a model at once (what admission before reading used to allow),
    plus 64 MiB for control traffic. One remote address may hold `max_inflight` bulk slots,
    half of them: a single host cannot take every exchange slot of the peer."""
    bulk = body_caps(cfg, n_params)["pushpull"]
    return IntakeLimits(
        grace_s=cfg.body_grace_s,
        min_rate=cfg.body_min_rate,
        budget_bytes=2 * cfg.exchange.max_inflight * bulk + (64 << 20),
        per_remote=cfg.exchange.max_inflight,
    )
