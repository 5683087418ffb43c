"""`Membership`: who is in the swarm, spread by push-pull gossip over a `Transport`.

Every `gossip_interval` the peer bumps its heartbeat and sends its digest (its table) to
`fanout` random live-or-suspect peers; each answers with its own digest after merging, and the
sender merges that answer. Failure detection is local (`swarmnode.gossip.membership.failure`): a member whose
heartbeat has not advanced in *our* table for `suspect_after` is suspect, for `dead_after` dead,
each stretched for a member whose own beats come later than that (up to `dead_after_max`).

Routes served (`handlers()`): `gossip` (push-pull), `join` (a newcomer's first contact: the seed
adds it at once and answers with the table), `leave` (a peer announcing it is going; marked
`left` at once). A malformed message raises `CodecError` (the HTTP layer answers 4xx); a
malformed entry inside a valid digest is dropped and logged.

Each round also probes one random dead member: a peer that was only cut off (partition, frozen
process) gets our digest, sees it was declared dead, refutes with a higher incarnation and is
taken back; without the probe a healed partition would stay split until tombstones expire.

`join()` is the client side of the `join` route: it tries the seeds in turn, backing off after
each failed pass, and gives up at once on a refusal that retrying cannot fix (401/403: the secret;
409: a taken id). `leave()` stops the loop and announces a left entry to every live peer.

Tasks: `start()` runs the gossip loop; each request to a peer runs in its own task, at most one
in flight per peer, so a frozen peer costs one deadline and never delays the heartbeat.
`close()` cancels and awaits all of them.
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections.abc import Callable, Sequence
from typing import Any

from swarmnode.gossip.auth import VERSION as ENVELOPE_VERSION
from swarmnode.gossip.auth import PeerKey
from swarmnode.gossip.errors import (
    CodecError,
    JoinTimeout,
    MembershipError,
    NotAMember,
    RemoteError,
    RequestTimeout,
    TransportError,
    VersionSkew,
)
from swarmnode.gossip.link import CONTROL, Arrival, Backoff, Handler, PartnerChoice, Transport
from swarmnode.gossip.membership.admission import DECLARED, Admission
from swarmnode.gossip.membership.caps import HostCap
from swarmnode.gossip.membership.config import MembershipConfig
from swarmnode.gossip.membership.entries import Gossiped
from swarmnode.gossip.membership.failure import ALIVE, DEAD, LEFT, SUSPECT
from swarmnode.gossip.membership.intake import CAPPED, UNTRUSTED, Intake
from swarmnode.gossip.membership.records import RecordSigner, Verifier, to_wire
from swarmnode.gossip.membership.sampling import dialable, sample_peers
from swarmnode.gossip.membership.table import Change, Member, MemberTable
from swarmnode.gossip.wire import (
    MAX_CONTROL_BYTES,
    PROTOCOL_VERSION,
    decode_control,
    encode_control,
    require,
)

log = logging.getLogger(__name__)

STALL_WARN_S = 1.0  # an event-loop stall this long is a warning; a shorter one is absorbed

GOSSIP_TARGET_STATES = (ALIVE, SUSPECT)  # a suspect peer may only be slow: keep talking to it
GOSSIP_BACKOFF_AFTER = 3  # failed gossips in a row before a live member is backed off
# Members relayed per digest that never answered a gossip of ours (issue 22): a table full of
# sybils is not copied into every digest (1,024 signed records cost a receiver ~0.1 s of CPU
# each time; six digests a second took the honest peers' whole core), while a newcomer still
# spreads (it also gossips itself to the members it learnt at its join).
RELAY_UNPROVEN = 16
# A message's merge sweeps the table (states, tombstones) at most this often once it holds
# more than SWEEP_ALWAYS members (the gossip tick sweeps every round whatever): one O(table)
# pass per message made a flood of small messages cost an honest peer its event loop.
SWEEP_ALWAYS = 64
SWEEP_EVERY_S = 0.1
# An enveloped message starts with these bytes (gossip/auth/signer.py: "SNA" and a version
# digit): a seed without a secret that receives one knows the joiner has a secret it lacks.
ENVELOPE_PREFIX = b"SNA"
# What a peer says of an envelope whose timestamp is too far off its clock (gossip/auth).
CLOCK_OFF = "off this peer's clock"
# What a seed without a secret answers a sealed join with; the joiner recognises it by this.
SEED_HAS_NO_SECRET = "this seed has no `secret`"


ChangeCallback = Callable[[Change], None]


def label_of(member: Member | None, peer_id: str) -> str:
    """How a log line names a member: `name (id prefix)` where its signed record names it,
    else its id (a name alone is not unique, an id alone is unreadable)."""
    name = (getattr(member, "meta", None) or {}).get("name")
    return f"{name} ({peer_id[:8]})" if isinstance(name, str) and name else peer_id


class Membership:
    """One peer's membership: table, gossip loop, join/leave, and the routes that serve them.

    `clock` (local monotonic seconds) judges liveness; tests may pass a fake one and drive
    `gossip_round()` by hand. The loop started by `start()` sleeps on the event loop's own
    time, so with `start()` the clock must be a real one.
    """

    def __init__(
        self,
        self_id: str,
        addr: str,
        transport: Transport,
        config: MembershipConfig | None = None,
        *,
        incarnation: int = 0,
        clock: Callable[[], float] = time.monotonic,
        rng: random.Random | None = None,
        key: PeerKey | None = None,
        admission: Admission | None = None,
        backoff: Backoff | None = None,
        secret: bool | None = None,
    ) -> None:
        if not isinstance(self_id, str) or not self_id:
            raise MembershipError(f"peer id must be a non-empty string, got {self_id!r}")
        if key is not None and key.peer_id != self_id:
            raise MembershipError(f"`peer_id` {self_id!r} is not its key's id {key.peer_id!r}")
        if not isinstance(incarnation, int) or incarnation < 0:
            raise MembershipError(f"incarnation must be an integer >= 0, got {incarnation!r}")
        self.cfg = (config or MembershipConfig()).validate()
        self.transport = transport
        self.secret = secret  # whether this peer holds a swarm secret (None: not told)
        self.backoff = backoff  # fed by the transport (linkstats); None: gossip to anyone live
        self._clock = clock
        self.rng = rng or random.Random()
        # at most about a third of a round's targets not proven by an answered gossip: honest
        # heartbeats keep flowing among a thousand silent members (gossip/link/partners.py)
        self._choice = (
            PartnerChoice(
                lambda a: backoff.proven(a, CONTROL),
                lambda a: backoff.streak(a, CONTROL) > 0,
                self.rng,
            )
            if backoff is not None
            else None
        )
        # With a key the table is signed: our entry travels sealed, others' only verified.
        # Without one (the in-process simulation, unit tests) entries are plain and trusted.
        self.key = key
        self.table = MemberTable(
            self_id,
            addr,
            incarnation,
            self.cfg.timing,
            max_members=self.cfg.max_members,
            seal=RecordSigner(key, clock=clock).entry if key is not None else None,
        )
        self.admission = admission or Admission(
            new_member_rate=self.cfg.new_member_rate,
            new_member_burst=self.cfg.new_member_burst,
        )
        self.verifier = Verifier() if key is not None else None
        self.intake = Intake(
            self.table,
            self.admission,
            self.verifier,
            self.cfg.max_digest,
            HostCap(
                self.cfg.max_members_per_host,
                remember=4 * self.cfg.max_members,
                per_prefix=self.cfg.max_members_per_prefix or None,
            ),
        )
        self._listeners: list[ChangeCallback] = []
        self._loop_task: asyncio.Task[None] | None = None
        self._inflight: dict[str, asyncio.Task[None]] = {}
        self._last_tick: float | None = None
        self._swept = -1e18  # when a merge last swept the table
        self._closed = False

    # --- identity and views ----------------------------------------------------------

    @property
    def self_id(self) -> str:
        return self.table.self_id

    @property
    def addr(self) -> str:
        return self.table.addr

    @property
    def incarnation(self) -> int:
        return self.table.incarnation

    @property
    def self_member(self) -> Member:
        e = self.table.self_entry()
        return Member(e.peer_id, e.addr, e.state, e.incarnation, e.heartbeat, 0.0, e.meta)

    def members(self) -> list[Member]:
        """Every other peer we know, tombstones included."""
        return self.table.members(self._now())

    def live_peers(self) -> list[Member]:
        """Other peers currently alive (not suspect, dead or left)."""
        return self.table.members(self._now(), (ALIVE,))

    def dialable_peers(self) -> list[Member]:
        """Live peers this peer may dial: not those that say they are outbound-only."""
        return dialable(self.live_peers())

    def get(self, peer_id: str) -> Member | None:
        return self.table.get(peer_id, self._now())

    def label(self, peer_id: str) -> str:
        """How a log line names a member (`label_of`)."""
        return label_of(self.get(peer_id), peer_id)

    def set_meta(self, **kv: Any) -> None:
        """Update the small map spread with our heartbeat (step, loss, acc, device...).

        Values must be None, bool, int, finite float or short str; `MembershipError` otherwise.
        """
        self.table.set_meta({**self.table.meta, **kv})

    def on_change(self, callback: ChangeCallback) -> Callable[[], None]:
        """Call `callback(change)` (synchronously, on the loop) whenever a member's state or
        incarnation changes. Returns a function that unsubscribes it."""
        self._listeners.append(callback)
        return lambda: self._listeners.remove(callback) if callback in self._listeners else None

    # --- routes ------------------------------------------------------------------------

    def handlers(self) -> dict[str, Handler]:
        return {"gossip": self._on_gossip, "join": self._on_join, "leave": self._on_leave}

    def _source(self, req: Arrival, msg: dict[str, Any]) -> str:
        """Who rate limits charge: the remote address if the transport told us, else the
        sender's declared id (then the global newcomer bucket is what bounds a flood)."""
        return req.remote or f"{DECLARED}{str(msg.get('sender'))[:64]}"

    async def _on_gossip(self, req: Arrival) -> bytes:
        msg = decode_control(req.body, "gossip")
        self._merge(msg, "gossip", self._source(req, msg))
        return self._encode("gossip-ack")

    def _one_entry(self, msg: dict[str, Any]) -> Gossiped:
        return self.intake.open(require(msg, "member", list))

    async def _on_join(self, req: Arrival) -> bytes:
        """A newcomer's entry goes through the intake as a digest's do (`Intake.sort`, then
        `merge`, which checks its signature); what a digest would drop, the join refuses, with
        why (the joiner gives up on a 403 and retries a 429 later)."""
        if bytes(req.body[: len(ENVELOPE_PREFIX)]) == ENVELOPE_PREFIX:
            # Sealed by a joiner with a secret, and this route is open here (no secret): say
            # why in one line (a 403 to a stranger is logged at INFO once per address).
            raise NotAMember(f"a sealed join, but {SEED_HAS_NO_SECRET}")
        msg = decode_control(req.body, "join")
        joiner = self._one_entry(msg)
        if joiner.peer_id == self.self_id:
            raise RemoteError(f"peer id {joiner.peer_id!r} is this peer's own id", 409)
        if self.table.leaving:  # the joiner would learn a swarm that this peer is leaving
            raise RemoteError("this peer is leaving the swarm: join through another", 503)
        admitted, refused = self.intake.sort([joiner], self._source(req, msg), self._now())
        if refused:
            raise self._join_refusal(joiner, refused[0][1])
        if not admitted:  # past the budget of signature checks for strangers: as in a digest
            raise RemoteError("busy checking new members' signatures: retry later", 429)
        if self._absorb([joiner], "join"):
            raise RemoteError(f"the record of {joiner.peer_id!r} is not signed by its key", 403)
        log.debug(
            "%s: %s (%s) joined through me", self.self_id, self.label(joiner.peer_id), joiner.addr
        )
        return self._encode("join-ack")

    def _join_refusal(self, joiner: Gossiped, why: str) -> RemoteError:
        if why == UNTRUSTED:
            return RemoteError(f"key of {joiner.peer_id!r} is not trusted by this swarm", 403)
        if why == CAPPED:
            cap = self.intake.cap
            return RemoteError(
                f"too many members at {joiner.addr} or from its source ({cap.per_host} per "
                f"address, {cap.per_prefix} per /24 or /64)",
                429,
            )
        return RemoteError("too many new members from this source: retry later", 429)

    async def _on_leave(self, req: Arrival) -> bytes:
        msg = decode_control(req.body, "leave")
        leaver = self._one_entry(msg)
        if leaver.state != LEFT:
            raise CodecError(f"a leave message must carry a left entry, got {leaver.state!r}")
        self._absorb([leaver])
        return encode_control("leave-ack")

    # --- merging and notification --------------------------------------------------------

    def _merge(self, msg: dict[str, Any], what: str, source: str, solicited: bool = False) -> bool:
        """Merge a digest message; True when we had to refute (our incarnation went up)."""
        entries = self.intake.parse(require(msg, "members", list), what)
        entries = self.intake.admit(entries, source, self._now(), solicited)
        before = self.table.incarnation
        self._absorb(entries, what)
        return self.table.incarnation != before

    def _absorb(self, entries: Sequence[Gossiped], what: str = "message") -> bool:
        """Merge admitted entries; True when one had a forged signature (the rest ignored)."""
        now = self._now()
        forged = self.intake.merge(entries, now, what)
        if len(self.table) <= SWEEP_ALWAYS or not 0 <= now - self._swept < SWEEP_EVERY_S:
            self._swept = now
            self._notify(self.table.sweep(now))
        return forged

    def _notify(self, changes: list[Change]) -> None:
        for change in changes:
            level = logging.DEBUG if change.new == SUSPECT else logging.INFO
            log.log(
                level,
                "%s: member %s (%s) %s -> %s, incarnation %d",
                self.self_id,
                self.label(change.peer_id),
                change.addr,
                change.old or "unknown",
                change.new,
                change.incarnation,
            )
            for callback in list(self._listeners):
                try:
                    callback(change)
                except Exception:  # a listener's bug must not stop membership
                    log.exception("membership change listener failed")

    def _encode(self, msg_type: str, **fields: Any) -> bytes:
        """Our digest as a control message, halved until it fits the control-message cap."""
        entries = self._relayed(self.table.digest(self._now(), self.cfg.max_digest, self.rng))
        while True:
            wire = [to_wire(g) for g in entries]
            body = encode_control(msg_type, sender=self.self_id, members=wire, **fields)
            if len(body) <= MAX_CONTROL_BYTES or len(entries) <= 1:
                return body
            entries = [entries[0], *self.rng.sample(entries[1:], len(entries) // 2)]

    def _relayed(self, entries: list[Gossiped]) -> list[Gossiped]:
        """Our entry, every member that answered our last gossip to it, and `RELAY_UNPROVEN`
        of the others at random (all of them without a back-off to tell: the simulations)."""
        if self.backoff is None or len(entries) <= RELAY_UNPROVEN + 1:
            return entries
        proven = self.backoff.proven_addrs(CONTROL)
        keep, new = [entries[0]], []
        for g in entries[1:]:
            (keep if g.addr in proven else new).append(g)
        if len(new) > RELAY_UNPROVEN:
            new = self.rng.sample(new, RELAY_UNPROVEN)
        return keep + new

    # --- time ----------------------------------------------------------------------------

    def _now(self) -> float:
        now = self._clock()
        if self._loop_task is not None and self._last_tick is not None:
            self._absorb_stall(now)
        return now

    def _absorb_stall(self, now: float) -> None:
        """If our own loop ran more than an interval late, we were deaf, not the others silent:
        extend everyone's silence timer by the lost time instead of declaring them dead."""
        interval = self.cfg.gossip_interval
        late = now - self._last_tick - interval
        if late > interval:
            # absorbed either way; a stall of seconds is worth an operator's look (a loaded box)
            log.log(
                logging.WARNING if late >= STALL_WARN_S else logging.INFO,
                "%s: event loop stalled for %.2f s; extending peers' silence timers",
                self.self_id,
                late,
            )
            self.table.credit(late)
            self._last_tick += late

    # --- joining and leaving (the client side; the routes above serve the other) -------

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
        told: set[tuple[str, str]] = set()  # (seed, what happened) already said
        attempt = 0
        while (remaining := deadline - loop.time()) > 0:
            seed = others[(first + attempt) % len(others)]
            try:
                await self._join_via(seed, min(self.cfg.join_attempt_timeout, remaining))
                return
            except (TransportError, CodecError) as exc:
                self._refuse_for_good(seed, exc)
                what = _what_happened(exc)
                errors[seed] = what
                if (seed, what) not in told:  # at once, once: not only when the time is up
                    told.add((seed, what))
                    log.info(
                        "%s: seed %s: %s; retrying for up to %.0f s (join-timeout)",
                        self.self_id,
                        seed,
                        what,
                        max(0.0, deadline - loop.time()),
                    )
                log.debug("%s: join via %s failed: %s", self.self_id, seed, exc)
            attempt += 1
            if attempt % len(others) == 0:  # a full pass failed: back off before the next
                pause = min(self._backoff(attempt // len(others)), deadline - loop.time())
                await asyncio.sleep(max(0.0, pause))
        detail = "; ".join(f"{s}: {why}" for s, why in errors.items()) or "no attempt completed"
        raise JoinTimeout(f"could not join within {timeout:g} s (join-timeout): {detail}")

    def _refuse_for_good(self, seed: str, exc: Exception) -> None:
        """Raise at once for a refusal that retrying cannot fix: the secret (401/403; named
        on both sides where one of them has none), a taken id (409) or another release (426,
        or an answer in another protocol version)."""
        status = getattr(exc, "status", None)
        if status == VersionSkew.status or isinstance(exc, VersionSkew):
            raise _skew(seed, exc) from None
        if status in (401, 403):
            raise MembershipError(f"could not join via {seed}: {self._secret_hint(exc)}") from None
        if status == 409:  # nor can it make two peers' ids differ
            raise MembershipError(
                f"could not join via {seed}: {exc}; give this peer another `peer_id`"
            ) from None

    def _secret_hint(self, exc: Exception) -> str:
        text = str(exc)
        if CLOCK_OFF in text:  # not the secret: the seed's clock and ours disagree
            said = text.split(" answered ", 1)[-1]
            return f"the seed refused this peer's clock ({said})"
        if SEED_HAS_NO_SECRET in text:
            return (
                "this peer has --secret and the seed has none: start every peer with the "
                "same --secret, or none"
            )
        if self.secret is False and getattr(exc, "status", None) == 401:
            return (
                "this swarm is closed (--secret) and this peer has none: start it with the "
                "swarm's --secret"
            )
        if self.secret and "authentication code" in text:
            return "the seed has another --secret than this peer: use the swarm's --secret"
        return f"refused ({text}); check the swarm `secret` (and `trust`)"

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

    async def introduce(self, members: Sequence[Member]) -> int:
        """Gossip with `members` now and wait for it: each then knows us. A joiner calls it
        before asking them for the model, which they hand only to members they know (else a
        403 on both sides of every join). Returns how many answered."""
        if self.table.leaving or not members:
            return 0
        body = self._encode("gossip")
        tasks = []
        for m in members:
            task = self._inflight.get(m.peer_id)  # one in flight already tells it as well
            if task is None:
                task = asyncio.create_task(self._exchange(m, body), name=f"gossip->{m.peer_id}")
                self._inflight[m.peer_id] = task
            tasks.append(task)
        results = await asyncio.gather(*(asyncio.shield(t) for t in tasks), return_exceptions=True)
        return sum(1 for ok in results if ok is True)

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

    # --- the gossip loop ---------------------------------------------------------------

    async def start(self) -> None:
        """Start the gossip loop (idempotent). Stopped by `leave()` or `close()`."""
        if self._closed:
            raise MembershipError("membership is closed")
        if self._loop_task is None and not self.table.leaving:
            self._loop_task = asyncio.create_task(self.run(), name=f"{self.self_id}:gossip")

    async def run(self) -> None:
        """The periodic loop: one `tick` per interval, on schedule, without catching up."""
        loop = asyncio.get_running_loop()
        next_at = loop.time()
        while not self.table.leaving:
            try:
                self.tick()
            except Exception:  # a bug in one round must not silence our heartbeat for good
                log.exception("%s: gossip round failed", self.self_id)
            next_at += self.cfg.gossip_interval
            delay = next_at - loop.time()
            if delay < 0:  # behind schedule: skip the missed ticks rather than burst
                next_at, delay = loop.time(), 0.0
            await asyncio.sleep(delay)

    def tick(self) -> list[Member]:
        """One gossip round: bump our heartbeat, judge the others, start the exchanges.

        Returns the peers gossiped with (`fanout` live ones and at most one dead one); their
        exchanges run in owned tasks."""
        if self.table.leaving:
            return []
        now = self._now()
        self._last_tick = now
        self.table.bump()
        self._notify(self.table.sweep(now))
        # an outbound-only member gossips to us; dialling it would wait out a deadline
        reachable = self._reachable(dialable(self.table.members(now, GOSSIP_TARGET_STATES)))
        if self._choice is None:
            targets = sample_peers(
                reachable,
                self.cfg.fanout,
                self.rng,
                exclude=self._inflight.keys(),
                states=GOSSIP_TARGET_STATES,
            )
        else:
            busy = self._inflight.keys()
            free = [m for m in reachable if m.peer_id not in busy]
            targets = self._choice.pick(free, self.cfg.fanout, lambda m: m.addr)
        # One dead member too: if it was only cut off (a partition, a frozen process), our
        # digest tells it that it was declared dead and it refutes, so the swarm heals; a peer
        # that really crashed refuses the connection at once. Left members are not probed.
        dead = sample_peers(
            dialable(self.table.members(now, (DEAD,))),
            1,
            self.rng,
            exclude=self._inflight.keys(),
            states=(DEAD,),
        )
        targets += dead
        if targets:
            body = self._encode("gossip")
            for m in targets:
                task = asyncio.create_task(self._exchange(m, body), name=f"gossip->{m.peer_id}")
                self._inflight[m.peer_id] = task
        return targets

    def _reachable(self, members: list[Member]) -> list[Member]:
        """Without members backed off after `GOSSIP_BACKOFF_AFTER` failed gossips in a row (live
        by relayed beats, never answering: sybils); not after one, so a blip does not silence us.
        The dead probe is never backed off (it heals partitions)."""
        if self.backoff is None:
            return members
        waiting = self.backoff.waiting
        return [m for m in members if not waiting(m.addr, CONTROL, GOSSIP_BACKOFF_AFTER)]

    async def gossip_round(self) -> int:
        """`tick()` and wait for its exchanges; the number that were answered (for tests)."""
        targets = self.tick()
        tasks = [self._inflight[m.peer_id] for m in targets if m.peer_id in self._inflight]
        results = await asyncio.gather(*tasks)
        return sum(1 for ok in results if ok)

    async def _exchange(self, peer: Member, body: bytes) -> bool:
        try:
            answer = await self.transport.request(
                peer.addr, "gossip", body, timeout=self.cfg.request_timeout
            )
            self._merge(
                decode_control(answer, "gossip-ack"),
                f"gossip answer of {peer.peer_id}",
                peer.addr,
            )
            return True
        except TransportError as exc:
            log.debug("%s: gossip with %s failed: %s", self.self_id, peer.peer_id, exc)
        except CodecError as exc:
            log.warning("%s: bad gossip answer from %s: %s", self.self_id, peer.peer_id, exc)
        finally:
            self._inflight.pop(peer.peer_id, None)
        return False

    async def close(self) -> None:
        """Stop the loop and every exchange in flight (idempotent). Does not announce."""
        self._closed = True
        await self._stop_tasks()

    async def _stop_tasks(self) -> None:
        tasks = [t for t in (self._loop_task, *self._inflight.values()) if t is not None]
        self._loop_task = None
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        self._inflight.clear()


def _what_happened(exc: Exception) -> str:
    """A failed join attempt in a few words: what an operator fixes differs for each."""
    text = str(exc)
    if isinstance(exc, RequestTimeout):
        return "no answer (a firewall dropping packets, or a frozen peer?)"
    if isinstance(exc, RemoteError):
        said = text.split(" answered ", 1)[1] if " answered " in text else f"{exc.status}: {text}"
        return f"answered {said[:160]}"
    if isinstance(exc, CodecError):
        return f"answered something that is not a join answer: {text[:160]}"
    low = text.lower()
    if "refused" in low or "connect call failed" in low:
        return "connection refused (no peer listens on that port?)"
    if "no route" in low or "unreachable" in low:
        return "no route to the host (wrong address, or the network is down)"
    if "name or service" in low or "nodename" in low or "getaddrinfo" in low or "dns" in low:
        return "its name does not resolve (a typo in --join?)"
    return f"unreachable ({text[-120:]})"


__all__ = [
    "Change",
    "JoinTimeout",
    "Member",
    "Membership",
    "MembershipConfig",
    "MembershipError",
]


def _skew(seed: str, exc: Exception) -> MembershipError:
    """A seed of another release refused us (426), or answered in another protocol version:
    one line naming its versions (its text says which) and ours."""
    return MembershipError(
        f"could not join via {seed}: {exc}; this joiner speaks protocol version "
        f"{PROTOCOL_VERSION}, envelope version {ENVELOPE_VERSION}"
    )
