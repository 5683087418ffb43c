"""`ReplayGuard`: fresh timestamps and unseen nonces, in bounded memory (gossip.auth.signer, operator).

Two ways to judge a message's time:

- `check(ts, nonce)` (the operator's admin requests): |now - ts| <= `max_skew` (30 s) on this
  peer's wall clock, and a nonce never seen in that window.
- `check(ts, nonce, sender=S, signed=...)` (the swarm's envelopes, once their tag and
  signature checked out): the window follows S's own clock as this peer has measured it, so
  that a member whose clock is off by minutes still exchanges. The rules, in order:

  1. |now - ts| <= `max_offset` (300 s, Kerberos's default), whoever sent it: beyond that the
     clocks are too far apart to tolerate, and the message is refused (`ClockSkew`).
  2. The nonce is new: a nonce is kept until its timestamp is `max_offset + max_skew` older
     than this clock, when rule 1 refuses the message anyway (the floor rises to it, so that
     this clock stepping back cannot re-open it).
  3. Where S is proven (`signed`: S is the member id whose Ed25519 key signed it, as on the
     routes that move a model), S's anchor: k = max(ts - monotonic) over S's accepted
     messages, the latest reading of S's clock against this peer's monotonic clock. A message
     with ts - monotonic < k - max_skew was sent more than `max_skew` before S's latest as S's
     own clock counts: held back, replayed, or S's clock went back; it is refused. Later is
     always taken (the anchor moves up): a message from S's future is no recording of its
     past, and only S holds its key. The anchor reads the monotonic clock, so a jump of this
     peer's own wall clock moves no window.

  An unproven S (the address an envelope names on a route no member key signs: gossip, join;
  with one shared secret any member can write another's address), a proven one unknown here
  (first contact, its anchor expired after `idle_s` without an accepted message, or evicted)
  and answers (fresh by their binding to a request nonce of ours) are judged by rules 1 and 2.
  Why a name gets no anchor: a member could move another's anchor ahead by writing its
  address, and so refuse that member's messages at every peer, for a few messages a minute.

What a recording is worth, to an attacker who can record every message and replay it later:
to another peer nothing (a request names its receiver, signer.py); to this peer, while its
nonce is kept, nothing (rule 2); afterwards its timestamp is over `max_offset + max_skew` old,
which rule 1 refuses. A message this peer never received (the attacker held it back) is
accepted at most once (rule 2), and only while it is within `max_skew` of its signer's latest
here, or, without an anchor (after a restart of this peer: no state survives it; after its
signer was not heard here for `idle_s`; on the unsigned routes), within `max_offset` of this
clock. So no recording is taken once its timestamp is `max_offset` behind this peer's clock
(that long after it was sent by a sender in step, twice that at most for one `max_offset`
ahead), restarts included, and a held-back request to move a model is good for `max_skew`
while its signer talks to this peer. The price of tolerating skew: that `max_offset` bound is
10x the old 30 s one, for a held-back gossip digest (old signed records, which a merge by
incarnation and heartbeat ignores) or a request held back from a peer that restarted or did
not hear its signer for `idle_s`.

Why the anchor is `max`, not the latest message: a latest-wins anchor would let an attacker
who delays each message a little more than the one before walk it back, `max_skew` at a time.
It may fall by `SLEW` (1000 ppm, twice the slew NTP allows) of the time since it was set, so
that a sender's clock that runs slow against ours is followed too.

Memory: nonces at most `max_nonces` in all, and `sender_nonces` per proven sender (one over
its share is refused, not others evicted), so one member's flood of signed requests raises no
floor for the others; anchors and readings (the clock offsets `clock_of` reports) at most
`max_senders` each, the least recently heard evicted first. A flood of fresh identities fills
them but re-opens no replay: nonces are kept apart from anchors (evicting an anchor forgets no
nonce), and evicting a nonce raises the floor (all at or below it is refused: a flood fails
closed). An evicted honest signer is judged by rules 1 and 2 until its next message anchors it
again. Unproven names share no quota (a member could spend another's) and anchor nothing; a
member writing another's address moves only that address's reading, which status shows and
nothing trusts.
"""

from __future__ import annotations

import heapq
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass

from swarmnode.gossip.errors import AuthError

MAX_SKEW_S = 30.0
MAX_NONCES = 1 << 17  # ~130k messages per window before the guard starts to fail closed
MAX_OFFSET_S = 300.0  # how far a member's clock may be off this peer's and still exchange
MAX_SENDERS = 4096  # anchors and readings kept (the member table holds 1024 at most)
SENDER_NONCES = 1 << 14  # one signer's nonces: ~50 signed requests a second here for 330 s
IDLE_S = 60.0  # an anchor without an accepted message for this long is forgotten
SLEW = 1e-3  # how fast an anchor may fall behind this peer's monotonic clock (s per s)


class ClockSkew(AuthError):
    """A message's timestamp is more than the window off this peer's clock: `skew` is this
    clock minus the sender's (positive: the sender's clock is behind), in seconds. `said`:
    the signer has logged it (once per sender), so the HTTP layer need not, every request.
    `tolerated`: the message was accepted anyway (returned by `check`, not raised)."""

    def __init__(
        self, message: str, skew: float, said: bool = False, tolerated: bool = False
    ) -> None:
        super().__init__(message)
        self.skew = skew
        self.said = said
        self.tolerated = tolerated


@dataclass(frozen=True)
class SenderClock:
    """What this peer measured of one sender's clock: `offset` is the sender's minus this
    peer's, in seconds (its latest message's, transit included); `refused`: that message was
    refused for it (beyond `max_offset`); `at`: when, on the monotonic clock."""

    offset: float
    refused: bool
    at: float


@dataclass
class _Anchor:
    k: float  # max(ts - monotonic) over the sender's accepted messages, slewed
    set_at: float  # monotonic time k was last raised
    seen_at: float  # monotonic time of the last accepted message
    warned: bool = False  # "older than its latest" said once per anchor


class _Nonces:
    """Nonces kept until their timestamp falls `horizon` behind the clock, at most `cap` in
    all and `share` per owner; what is forgotten early raises the floor."""

    def __init__(self, horizon: float, cap: int, share: int) -> None:
        self.horizon, self.cap, self.share = horizon, cap, share
        self.floor = float("-inf")
        self.owner: dict[bytes, str] = {}
        self.count: dict[str, int] = {}
        self.by_time: list[tuple[float, bytes]] = []  # min-heap of (timestamp, nonce)

    def admit(self, now: float, ts: float, nonce: bytes, owner: str = "") -> None:
        self.expire(now)
        if ts <= self.floor:
            raise AuthError("message is older than the replay window can vouch for")
        if nonce in self.owner:
            raise AuthError("replayed message (nonce already seen)")
        if owner and self.count.get(owner, 0) >= self.share:  # unproven ones: the cap only
            raise AuthError(
                f"{owner} sent over {self.share} messages in the replay window: refused until "
                "its oldest expire (a flood)"
            )

    def add(self, ts: float, nonce: bytes, owner: str = "") -> None:
        self.owner[nonce] = owner
        self.count[owner] = self.count.get(owner, 0) + 1
        heapq.heappush(self.by_time, (ts, nonce))
        while len(self.owner) > self.cap:
            self.floor = max(self.floor, self._pop())

    def expire(self, now: float) -> None:
        # the floor follows: were this clock set back, a forgotten nonce's message would pass
        while self.by_time and self.by_time[0][0] < now - self.horizon:
            self.floor = max(self.floor, self._pop())

    def _pop(self) -> float:
        ts, nonce = heapq.heappop(self.by_time)
        owner = self.owner.pop(nonce)
        left = self.count[owner] - 1
        if left:
            self.count[owner] = left
        else:
            del self.count[owner]
        return ts


class ReplayGuard:
    """Rejects stale timestamps and nonces already seen, in bounded memory. Thread-safe.

    `check(ts, nonce)`: fresh when |now - ts| <= max_skew and the nonce is new. Nonces are kept
    until their timestamp leaves the window (after that, the skew check rejects a replay
    anyway). When more than `max_nonces` are live, the oldest are evicted and `floor` rises to
    their timestamp: anything at or below the floor is rejected, so eviction never re-opens a
    replay. `check(ts, nonce, sender=S)`: the window follows S's clock (the module's docstring).
    """

    def __init__(
        self,
        max_skew: float = MAX_SKEW_S,
        max_nonces: int = MAX_NONCES,
        clock: Callable[[], float] = time.time,
        *,
        max_offset: float = MAX_OFFSET_S,
        max_senders: int = MAX_SENDERS,
        sender_nonces: int = SENDER_NONCES,
        idle_s: float = IDLE_S,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        if not max_skew > 0 or max_nonces < 1:
            raise ValueError("max_skew must be > 0 and max_nonces >= 1")
        if not max_offset >= max_skew or max_senders < 1 or sender_nonces < 1 or not idle_s > 0:
            raise ValueError(
                "max_offset must be >= max_skew, max_senders and sender_nonces >= 1, idle_s > 0"
            )
        self.max_skew, self.max_nonces, self.max_offset = max_skew, max_nonces, max_offset
        self.max_senders, self.idle_s = max_senders, idle_s
        self.clock, self.monotonic = clock, monotonic
        self._plain = _Nonces(max_skew, max_nonces, max_nonces)
        self._tolerant = _Nonces(max_offset + max_skew, max_nonces, sender_nonces)
        self._anchors: OrderedDict[str, _Anchor] = OrderedDict()  # least recently accepted first
        self._readings: OrderedDict[str, SenderClock] = OrderedDict()  # least recent first
        self._lock = threading.Lock()

    @property
    def floor(self) -> float:
        """Timestamps at or below this are refused by `check(ts, nonce)` (evicted early)."""
        return self._plain.floor

    def __len__(self) -> int:
        return len(self._plain.owner) + len(self._tolerant.owner)

    def senders(self) -> int:
        """How many signers' anchors are held."""
        return len(self._anchors)

    def check(
        self,
        ts: float,
        nonce: bytes,
        *,
        sender: str | None = None,
        signed: bool = False,
        answer: bool = False,
    ) -> ClockSkew | None:
        """Record (ts, nonce) or raise `AuthError` if it is stale, from the future, or seen.

        Without `sender`, within `max_skew` of this clock. With one (the member id whose key
        signed it, `signed`; else the address it names, or ""), the rules of the module's
        docstring; `answer`: an answer, bound to a request nonce of ours (fresh by that
        binding, naming no sender). Returns a `ClockSkew` with `tolerated` set where the
        message was accepted although it is more than `max_skew` off this clock."""
        now = self.clock()
        if sender is None:
            self._check_plain(now, ts, nonce)
            return None
        who = "" if answer else sender
        proven = who if signed else ""  # anchors and quotas: only for a key's holder
        mono = self.monotonic()
        if abs(now - ts) > self.max_offset:
            with self._lock:
                self._read(who, SenderClock(ts - now, True, mono))
            raise ClockSkew(
                f"message timestamp is {now - ts:+.1f} s off this peer's clock "
                f"(max {self.max_offset:g} s)",
                now - ts,
            )
        with self._lock:
            self._tolerant.admit(now, ts, nonce, proven)
            if proven:
                self._anchor(proven, ts - mono, mono)
            self._tolerant.add(ts, nonce, proven)
            self._read(who, SenderClock(ts - now, False, mono))
        if abs(now - ts) <= self.max_skew:
            return None
        return ClockSkew(
            f"message timestamp is {now - ts:+.1f} s off this peer's clock (tolerated up to "
            f"{self.max_offset:g} s)",
            now - ts,
            tolerated=True,
        )

    def clock_of(self, *senders: str) -> SenderClock | None:
        """The latest reading of a sender's clock under any of its names (its member id, its
        address), or None where none is held. A reading under an address is the word of
        whoever wrote that address (any member, with one shared secret): shown, not trusted."""
        with self._lock:
            seen = [c for s in senders if s and (c := self._readings.get(s)) is not None]
        return max(seen, key=lambda c: c.at, default=None)

    def _read(self, who: str, reading: SenderClock) -> None:
        if not who:  # answers and unnamed senders: nobody to show it against
            return
        self._readings[who] = reading
        self._readings.move_to_end(who)
        while len(self._readings) > self.max_senders:
            self._readings.popitem(last=False)

    def _check_plain(self, now: float, ts: float, nonce: bytes) -> None:
        if abs(now - ts) > self.max_skew:
            raise ClockSkew(
                f"message timestamp is {now - ts:+.1f} s off this peer's clock "
                f"(max skew {self.max_skew:g} s)",
                now - ts,
            )
        with self._lock:
            self._plain.admit(now, ts, nonce)
            self._plain.add(ts, nonce)

    def _anchor(self, who: str, k: float, mono: float) -> None:
        """Judge a message by its signer's anchor (rule 3) and move the anchor; raise if it
        is older than the signer's latest by more than `max_skew`."""
        a = self._anchors.get(who)
        if a is not None and mono - a.seen_at > self.idle_s:
            a = None  # not heard for idle_s: judged as a first contact
        if a is None:
            self._anchors[who] = _Anchor(k, mono, mono)
            self._anchors.move_to_end(who)
            self._bound(mono)
            return
        slewed = a.k - SLEW * (mono - a.set_at)
        if k < slewed - self.max_skew:
            self._older(who, a, slewed - k)
        if k > slewed:
            a.k, a.set_at = k, mono
        a.seen_at, a.warned = mono, False
        self._anchors.move_to_end(who)

    def _older(self, who: str, a: _Anchor, by: float) -> None:
        text = (
            f"a message of {who} is {by:.0f} s older than its latest here by its own clock: "
            f"refused (held back or replayed, or its clock went back; then its messages are "
            f"taken again once it has been refused for {self.idle_s:g} s)"
        )
        refused = AuthError(text)
        # its clock going back refuses every message: the HTTP layer says the first (with the
        # route), the others at DEBUG
        refused.said = a.warned  # type: ignore[attr-defined]
        a.warned = True
        raise refused

    def _bound(self, mono: float) -> None:
        """At most `max_senders` anchors: the least recently accepted go first, and so do
        those not heard for `idle_s` (they would be judged as first contacts anyway)."""
        while self._anchors:
            oldest = next(iter(self._anchors.values()))
            if len(self._anchors) <= self.max_senders and mono - oldest.seen_at <= self.idle_s:
                break
            self._anchors.popitem(last=False)
