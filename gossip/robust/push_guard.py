"""The bound on what a pushed model may do to this peer: both exchange modes, one mechanism.

A peer that is pushed to (a `pushpull` request) mixes the pushed model y in only as

    own + clip(y - own, tau)        (nothing at all when |y - own| > SS_CLIP_REJECT x tau)

and then at its mode's weight, so one push moves an honest model by at most tau x weight
whatever the pusher sent. Without it one small push of 2 t - x would land the receiver on the
attacker's target t (docs/security.md, "Hostile insiders").

Only the radius tau differs between the modes, and both come from the peer's *own* rounds, in
which it picked the peers at random (a pusher chooses when and how often it pushes, so its
pushes never set the bound they are judged by):

- `robust` (ss-clip): the clip radius of the peer's last round (`aggregate.clip_radius`).
- `average`: tau = RADIUS_FACTOR x median of the last WINDOW distances |x_j - own| from the peer
  to the models its group answered with. The median keeps one lying answer in a round from
  widening the bound; the factor leaves room for an honest pusher that trained a little longer
  than the group's typical member. From the first round on, the few distances there are give
  the median. Before it (no distance yet) tau = factor x |own|, the norm of my own model: peers
  that started at once from different random models (about 1.4 |own| apart) still mix in full,
  while a push built to replace my model (the attack: biases at -1e4, |y - own|
  thousands of times |own|) is refused. Robust mode mixes nothing before its first round.

Anchored: a radius that follows the distances the peer sees would let a drag that pulls the
honest models apart widen its own allowance. So the average radius is factor x min(median of
the last WINDOW distances, ANCHOR_SLACK x median of the last LONG_WINDOW), and it grows by at
most GROWTH a round (it shrinks at once), once ANCHOR_MIN distances are known: in a young swarm
the first distances say nothing yet, and a radius anchored at once would refuse a joiner whose
pushes jump as it trains on its shard (docs/security.md, "Hostile insiders").
How often a sender may push, and how far its pushes may move this peer in all, is
push_budget.py's business.
"""

from __future__ import annotations

import logging
import time
from collections import OrderedDict, deque
from collections.abc import Callable, Iterable

import numpy as np
from swarmnode.gossip.robust import chunked
from swarmnode.gossip.robust.aggregate import SS_CLIP_REJECT, clip_toward

log = logging.getLogger(__name__)

WINDOW = 16  # distances kept: about five rounds of a group of 3
LONG_WINDOW = 256  # the anchor's: about 85 rounds of a group of 3
ANCHOR_SLACK = 2.0  # the radius is at most this x the anchor's median
GROWTH = 0.2  # the radius grows by at most this fraction a round
# Not 2: that clipped honest pushes and cost the swarm points (docs/exchange.md, "Pushes and
# their bounds")
RADIUS_FACTOR = 4.0
# average mode with the push budget on: a push is *clipped* at this share of the radius (2 x
# the typical distance) and still refused only beyond SS_CLIP_REJECT radii. At the full radius a
# dissensus liar's pushes, cut along the consensus but not sideways, still moved an honest peer
# by two typical distances each; half costs nothing with no attacker (docs/benchmarks.md,
# "Hostile insiders").
PUSH_CLIP_SHARE = 0.5
LOG_EVERY_S = 60.0  # one refusal line per sender per minute (a liar may push at every round)
MAX_SENDERS_LOGGED = 256  # the rate limiter's memory; the oldest sender is forgotten first
REPEAT_WARN = 3  # refusals of one sender, over at least WARN_SPAN_S, before a WARNING
WARN_SPAN_S = 30.0  # an honest joiner is refused for a few seconds; a liar for as long as it lies
SPAN_RESET_S = 120.0  # a sender not refused for this long starts a new span
ANCHOR_MIN = 32  # distances before the anchor (and the growth bound) applies


class PushGuard:
    """Clips pushed models toward this peer's own; remembers the distances of its own rounds."""

    def __init__(
        self,
        *,
        window: int = WINDOW,
        factor: float = RADIUS_FACTOR,
        reject: float = SS_CLIP_REJECT,
        log_every_s: float = LOG_EVERY_S,
        clock: Callable[[], float] = time.monotonic,
        anchored: bool = True,
    ) -> None:
        if window < 1 or factor <= 0 or reject < 1:
            raise ValueError(
                f"`window` {window}, `factor` {factor} or `reject` {reject} out of range"
            )
        self.factor = factor
        self.reject = reject
        self.anchored = anchored  # False: the short median alone (`push_budget` off)
        self.log_every_s = log_every_s
        self._clock = clock
        self._dists: deque[float] = deque(maxlen=window)
        self._long: deque[float] = deque(maxlen=max(window, LONG_WINDOW))
        self._tau: float | None = None  # the anchored radius, set by `observe`
        self._last_logged: OrderedDict[str, float] = OrderedDict()
        # per sender: (first refusal of its span, its last refusal, refusals in the span)
        self._refusals: OrderedDict[str, tuple[float, float, int]] = OrderedDict()
        self._warned: set[str] = set()  # senders whose refusals were a WARNING already
        self.refused = 0  # pushes farther than `reject` x tau: not mixed

    # --- the radius ------------------------------------------------------------------------

    def observe(self, own: np.ndarray, answers: Iterable[np.ndarray]) -> None:
        """Record |x_j - own| for each model of my own round's group (average mode)."""
        self.record(chunked.distance(own, other) for other in answers)

    def record(self, distances: Iterable[float]) -> None:
        """Record my group's distances |x_j - own|, measured by the caller (`ParamStore.distance`:
        no snapshot of my model), and move the radius: factor x min(short median, ANCHOR_SLACK x
        long median), up by at most GROWTH since the last round."""
        for d in distances:
            if np.isfinite(d):
                self._dists.append(d)
                self._long.append(d)
        if not self._dists:
            return
        short = float(np.median(np.fromiter(self._dists, float)))
        if not self.anchored:
            self._tau = self.factor * short
            return
        if len(self._long) < ANCHOR_MIN:  # a young swarm: no anchor yet (see the module doc)
            self._tau = self.factor * short
            return
        anchor = float(np.median(np.fromiter(self._long, float)))
        tau = self.factor * min(short, ANCHOR_SLACK * anchor)
        if self._tau is not None and self._tau > 0:
            tau = min(tau, self._tau * (1.0 + GROWTH))
        self._tau = tau

    def radius(self) -> float | None:
        """tau (see `record`); None before any distance (or all zero: a group identical to
        me says nothing about how far an honest peer may be)."""
        return self._tau if self._tau is not None and self._tau > 0 else None

    def typical(self) -> float | None:
        """The distance an honest model usually is from this peer: tau / factor."""
        tau = self.radius()
        return None if tau is None else tau / self.factor

    def first_radius(self, own: np.ndarray) -> float | None:
        """The bound before my first round: factor x |own| (None for an all-zero model: it
        has no scale to bound by)."""
        return self.radius_of_norm(chunked.norm(own))

    def radius_of_norm(self, norm: float) -> float | None:
        """`first_radius` of a model whose norm the caller measured."""
        tau = self.factor * norm
        return tau if tau > 0 and np.isfinite(tau) else None

    # --- one push --------------------------------------------------------------------------

    def bound(
        self,
        own: np.ndarray,
        theirs: np.ndarray,
        tau: float | None,
        sender: str,
        clip: float | None = None,
    ) -> np.ndarray | None:
        """own + clip(theirs - own, min(tau, clip)), or None: not to be mixed (no radius yet,
        or farther than `reject` x tau). `clip`: a tighter radius for this push (what its
        sender's travel budget leaves: push_budget.py). Runs in a worker thread: one pass over
        both models, and a second only to clip (within the radius the answer is `theirs`)."""
        if tau is None:
            log.debug("a push from %s is not mixed: no clip radius before my first round", sender)
            return None
        out = clip_toward(own, theirs, tau)
        if out is None:
            self.refused += 1
            self._log_refusal(sender, chunked.distance(own, theirs), tau)
            return None
        if clip is not None and clip < tau:
            if not clip > 0:
                return None
            dist = chunked.distance(own, out)
            if dist > clip:
                out = chunked.toward(own, out, clip / dist)
        return out

    def judge(self, dist: float, tau: float | None, sender: str) -> str:
        """What `bound` does with a push `dist` from my model, without the models: "mix" it as
        it came (within tau), "refuse" it (no radius, or beyond the drop bound: counted and
        logged as `bound` does), or "clip" it (only `bound`, with my model, can)."""
        if tau is None:
            log.debug("a push from %s is not mixed: no clip radius before my first round", sender)
            return "refuse"
        if not dist <= SS_CLIP_REJECT * tau:  # NaN too: never mixed (as clip_toward)
            self.refused += 1
            self._log_refusal(sender, dist, tau)
            return "refuse"
        return "mix" if dist <= tau else "clip"

    def _log_refusal(self, sender: str, dist: float, tau: float) -> None:
        """One line per sender per period: INFO while its refusals are news, WARNING once the
        same sender has been refused REPEAT_WARN times over WARN_SPAN_S or more. An honest
        partner that trained far ahead while this peer joined or synced is refused for a few
        seconds and then mixes again (seen at full speed right after a join: its distance 100x
        the radius anchored on the synced models); that is no fault. A liar is refused for as
        long as it pushes: that one an operator should look at."""
        now = self._clock()
        first, last_refused, count = self._refusals.pop(sender, (now, now, 0))
        if now - last_refused > SPAN_RESET_S:
            first, count = now, 0
            self._warned.discard(sender)
        count += 1
        self._refusals[sender] = (first, now, count)  # most recent last: oldest forgotten first
        while len(self._refusals) > MAX_SENDERS_LOGGED:
            self._refusals.popitem(last=False)
        warn = count >= REPEAT_WARN and now - first >= WARN_SPAN_S
        last = self._last_logged.get(sender)
        fresh = last is None or now - last >= self.log_every_s
        if not fresh and not (warn and sender not in self._warned):
            return
        if warn:
            self._warned.add(sender)
            if len(self._warned) > MAX_SENDERS_LOGGED:
                self._warned.clear()  # a bound, not a record: at worst a second WARNING
        self._last_logged[sender] = now
        self._last_logged.move_to_end(sender)
        while len(self._last_logged) > MAX_SENDERS_LOGGED:
            self._last_logged.popitem(last=False)
        log.log(
            logging.WARNING if warn else logging.INFO,
            "a model pushed by %s is %.3g away, more than %.0f clip radii (tau %.3g): not mixed "
            "(%d from it, %d refused so far; next line for this sender in %.0f s at the earliest)",
            sender,
            dist,
            self.reject,
            tau,
            count,
            self.refused,
            self.log_every_s,
        )
