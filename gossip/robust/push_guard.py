"""The bound on what a pushed model may do to this peer: both exchange modes, one mechanism.

A peer that is pushed to (a `pushpull` request) mixes the pushed model y in only as

    own + clip(y - own, tau)        (nothing at all when |y - own| > SS_CLIP_REJECT x tau)

and then at its mode's weight, so one push moves an honest model by at most tau x weight
whatever the pusher sent. Without it, `average` mode mixed y in as is: one 19 KB push of
2 t - x landed the receiver on the attacker's target t (issue 10, item 7).

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
# At 2 it clipped honest pushes: the worst of 4 iid peers on the signal task fell 2-3 points (75-76%
# against 79% unbounded); at 4, 78-79% (tests/integration/test_learning.py, 2026-11-24)
RADIUS_FACTOR = 4.0
LOG_EVERY_S = 60.0  # one refusal line per sender per minute (a liar may push at every round)
MAX_SENDERS_LOGGED = 256  # the rate limiter's memory; the oldest sender is forgotten first
REPEAT_WARN = 3  # refusals of one sender before its line is a WARNING


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
    ) -> None:
        if window < 1 or factor <= 0 or reject < 1:
            raise ValueError(
                f"`window` {window}, `factor` {factor} or `reject` {reject} out of range"
            )
        self.factor = factor
        self.reject = reject
        self.log_every_s = log_every_s
        self._clock = clock
        self._dists: deque[float] = deque(maxlen=window)
        self._last_logged: OrderedDict[str, float] = OrderedDict()
        self._refusals: OrderedDict[str, int] = OrderedDict()  # per sender, for the log level
        self.refused = 0  # pushes farther than `reject` x tau: not mixed

    # --- the radius ------------------------------------------------------------------------

    def observe(self, own: np.ndarray, answers: Iterable[np.ndarray]) -> None:
        """Record |x_j - own| for each model of my own round's group (average mode)."""
        self.record(chunked.distance(own, other) for other in answers)

    def record(self, distances: Iterable[float]) -> None:
        """Record my group's distances |x_j - own|, measured by the caller (`ParamStore.distance`:
        no snapshot of my model)."""
        for d in distances:
            if np.isfinite(d):
                self._dists.append(d)

    def radius(self) -> float | None:
        """tau = factor x median of the recorded distances; None before any (or all zero:
        a group identical to me says nothing about how far an honest peer may be)."""
        if not self._dists:
            return None
        tau = self.factor * float(np.median(np.fromiter(self._dists, float)))
        return tau if tau > 0 else None

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
        self, own: np.ndarray, theirs: np.ndarray, tau: float | None, sender: str
    ) -> np.ndarray | None:
        """own + clip(theirs - own, tau), or None: not to be mixed (no radius yet, or farther
        than `reject` x tau). Runs in a worker thread: one pass over both models, and a second
        only to clip (within tau the answer is `theirs` itself)."""
        if tau is None:
            log.debug("a push from %s is not mixed: no clip radius before my first round", sender)
            return None
        out = clip_toward(own, theirs, tau)
        if out is None:
            self.refused += 1
            self._log_refusal(sender, chunked.distance(own, theirs), tau)
            return None
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
        """One line per sender per period. INFO for a sender's first refusals: an honest
        partner that trained far ahead while this peer joined or synced is refused once or
        twice and then mixes again (seen at full speed right after a join). WARNING once the
        same sender has been refused REPEAT_WARN times: that one an operator should look at."""
        now = self._clock()
        count = self._refusals.pop(sender, 0) + 1
        self._refusals[sender] = count  # most recent last: the oldest sender is forgotten first
        while len(self._refusals) > MAX_SENDERS_LOGGED:
            self._refusals.popitem(last=False)
        last = self._last_logged.get(sender)
        if count != REPEAT_WARN and last is not None and now - last < self.log_every_s:
            return
        self._last_logged[sender] = now
        self._last_logged.move_to_end(sender)
        while len(self._last_logged) > MAX_SENDERS_LOGGED:
            self._last_logged.popitem(last=False)
        log.log(
            logging.WARNING if count >= REPEAT_WARN else logging.INFO,
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
