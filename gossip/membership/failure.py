"""Failure-detector timing as pure functions: no clock, no I/O, tested with tables.

A member is judged only by *local* time: how long ago its heartbeat counter last advanced in our
own table (`time.monotonic` of this process). Remote clocks never enter the computation, so skew
between machines cannot cause a false death.

    silent for < suspect_after           -> alive
    suspect_after <= silent < dead_after -> suspect
    silent >= dead_after                 -> dead (a tombstone from last_advance + dead_after)

Both thresholds grow with the swarm's size (`size_allowance`): in a large swarm heartbeats
reach a peer through several hops, so healthy silences are longer.

And each member's follow its own heartbeats (`gap_update`, `stretched`): the gaps between two
advances of its counter in our table are measured (a mean and a mean deviation, as TCP measures
a round trip), and where the longest gap they let us expect (`worst_gap`) is longer than the
longest a healthy member shows (`healthy_gap`: two intervals, plus the size allowance), both
thresholds are stretched by that ratio. A member on a slow or jittery link, whose beats come
late but steadily, is then not declared dead; one whose beats come as often as the settings
assume keeps them exactly (they are floors, never shortened: a member heard more often than
that is no reason to give up on it sooner), so a crash of a healthy member is detected as fast
as before. The stretch ends at `dead_cap` (4 x `dead_after` unless set): a member that beats
irregularly on purpose only delays the detection of its own death, and never past the cap.

Dead and left entries stay as tombstones for `tombstone_ttl` so that stale gossip cannot bring
them back; a newer incarnation of the same id does override a tombstone.
"""

from __future__ import annotations

import math

ALIVE = "alive"
SUSPECT = "suspect"
DEAD = "dead"
LEFT = "left"
STATES = (ALIVE, SUSPECT, DEAD, LEFT)
TOMBSTONES = (DEAD, LEFT)


def liveness(last_advance: float, now: float, suspect_after: float, dead_after: float) -> str:
    """alive / suspect / dead for a member whose heartbeat last advanced at `last_advance`."""
    silent = now - last_advance
    if silent >= dead_after:
        return DEAD
    if silent >= suspect_after:
        return SUSPECT
    return ALIVE


# The gap estimator (Jacobson's, as TCP's round-trip estimate): weights of a new gap in the mean
# and in the mean deviation, how many deviations past the mean a beat may come, and the least
# deviation assumed, as a share of the mean (a member heard like clockwork still misses a beat
# now and then: without it a steady 2 s member would be doubted at 2.01 s)
GAP_GAIN = 0.125
DEV_GAIN = 0.25
GAP_K = 3.0
DEV_FLOOR = 0.25
DEAD_CAP_FACTOR = 4.0  # `dead_after_max` 0: the stretch ends at this x dead_after


def gap_update(mean: float, dev: float, gap: float, prior: float) -> tuple[float, float, float]:
    """The (mean, mean deviation, `worst_gap`) of a member's heartbeat gaps after one more
    `gap` (seconds). A mean of 0 is no gap measured yet: the estimate starts from `prior` (the
    gossip interval, a healthy member's), so one late beat stretches a newcomer's thresholds a
    little, not by all of its lateness. Runs at every heartbeat advance: no calls inside."""
    if mean <= 0.0:
        mean, dev = prior, 0.0
    dev += DEV_GAIN * ((gap - mean if gap > mean else mean - gap) - dev)
    mean += GAP_GAIN * (gap - mean)
    floor = DEV_FLOOR * mean
    return mean, dev, mean + GAP_K * (dev if dev > floor else floor)  # worst_gap, inlined


def worst_gap(mean: float, dev: float) -> float:
    """The longest heartbeat gap a member with these statistics lets us expect (0: none yet)."""
    return mean + GAP_K * max(dev, DEV_FLOOR * mean)


def healthy_gap(gossip_interval: float, allowance: float) -> float:
    """The longest gap the configured thresholds assume: two intervals (`timing_problems`
    requires suspicion no sooner) plus the hops of a large swarm (`size_allowance`)."""
    return 2.0 * gossip_interval + allowance


def dead_cap(dead_after: float, dead_after_max: float) -> float:
    """The most silence any member is granted before it is dead (`dead_after_max`, 0: 4x)."""
    return dead_after_max if dead_after_max > 0 else DEAD_CAP_FACTOR * dead_after


def stretched(
    suspect_after: float, dead_after: float, worst: float, healthy: float, cap: float
) -> tuple[float, float]:
    """The (suspect, dead) silences for a member whose worst expected gap is `worst`: the
    thresholds in effect (`thresholds`) times worst / healthy where that exceeds 1, death at
    most at `cap` (or the thresholds themselves, where a large swarm's allowance passed it),
    suspicion still before death by as much as the thresholds put between them."""
    if worst <= healthy:
        return suspect_after, dead_after
    ratio = worst / healthy
    dead = max(dead_after, min(cap, dead_after * ratio))
    return min(suspect_after * ratio, dead - (dead_after - suspect_after)), dead


def dead_since(last_advance: float, dead_after: float) -> float:
    """The local time at which a silent member became dead (its tombstone's start)."""
    return last_advance + dead_after


def tombstone_expired(since: float, now: float, ttl: float) -> bool:
    """Whether a tombstone created at `since` may be forgotten at `now`."""
    return now - since >= ttl


def spread_rounds(n: int, fanout: int) -> int:
    """Expected push-pull rounds for one update to reach all `n` peers (an estimate, not a bound).

    Early on every informed peer pushes to `fanout` peers and is pulled from by about `fanout`
    more, so the informed set grows by ~(1 + 2 fanout) a round; the last stragglers take about one
    more round (push-pull's end phase shrinks the uninformed set doubly-exponentially).
    """
    if n <= 1:
        return 0
    if fanout < 1:
        raise ValueError("fanout must be >= 1")
    return math.ceil(math.log(n) / math.log(1 + 2 * fanout)) + 1


def size_allowance(n: int, fanout: int, gossip_interval: float) -> float:
    """Extra silence to tolerate from a member of a swarm of `n` peers (seconds).

    While n - 1 <= fanout every peer hears every other directly each interval. Beyond that a
    peer that just heard a member directly is *ahead* of the crowd, and its next advance waits
    until the member's newer beats have spread: about `spread_rounds(n)` intervals. The
    suspect/dead thresholds grow by that much (memberlist scales its suspicion timeout with
    log n for the same reason); `bench_membership.py --mode sim` measures the silences.
    """
    if n - 1 <= fanout:
        return 0.0
    return gossip_interval * (spread_rounds(n, fanout) - 1)


def thresholds(
    suspect_after: float, dead_after: float, gossip_interval: float, n: int, fanout: int
) -> tuple[float, float]:
    """The (suspect, dead) silences in effect in a swarm of `n` live peers."""
    extra = size_allowance(n, fanout, gossip_interval)
    return suspect_after + extra, dead_after + extra


def detection_deadline(dead_after: float, gossip_interval: float, n: int, fanout: int) -> float:
    """Seconds after a crash by which every peer should have marked it dead (an estimate).

    A peer's last sight of the crashed member's heartbeat lags the crash by the time gossip
    takes to reach it (about `spread_rounds` intervals); its own dead timer (`dead_after` plus
    the size allowance) starts then. With n = 4 and fanout 3 every peer hears the member
    directly, so the lag and the allowance are 0.
    """
    lag_rounds = 0 if n - 1 <= fanout else spread_rounds(n, fanout)
    allowance = size_allowance(n, fanout, gossip_interval)
    return dead_after + allowance + lag_rounds * gossip_interval


def timing_problems(
    gossip_interval: float, suspect_after: float, dead_after: float, tombstone_ttl: float
) -> list[str]:
    """What is wrong with a set of timing settings (empty when they are usable)."""
    problems = []
    values = {
        "gossip_interval": gossip_interval,
        "suspect_after": suspect_after,
        "dead_after": dead_after,
        "tombstone_ttl": tombstone_ttl,
    }
    for name, value in values.items():
        if not (isinstance(value, (int, float)) and math.isfinite(value) and value > 0):
            problems.append(f"`{name}` must be a positive number of seconds, got {value!r}")
    if problems:
        return problems
    # A member is heard about once per interval at best: suspecting it sooner than two
    # intervals of silence would flag healthy peers on every scheduling hiccup.
    if suspect_after < 2 * gossip_interval:
        problems.append(
            f"`suspect_after` {suspect_after:g} s must be at least twice `gossip_interval` "
            f"({gossip_interval:g} s)"
        )
    if dead_after <= suspect_after:
        problems.append(
            f"`dead_after` {dead_after:g} s must exceed `suspect_after` {suspect_after:g} s"
        )
    # Stale gossip about a dead member can float for a few spread times after it died; the
    # tombstone must outlive that or the member would come back.
    if tombstone_ttl < 4 * dead_after:
        problems.append(
            f"`tombstone_ttl` {tombstone_ttl:g} s must be at least 4x `dead_after` ({dead_after:g} s)"
        )
    return problems
