"""Failure-detector timing as pure functions: no clock, no I/O, tested with tables.

A member is judged only by *local* time: how long ago its heartbeat counter last advanced in our
own table (`time.monotonic` of this process). Remote clocks never enter the computation, so skew
between machines cannot cause a false death.

    silent for < suspect_after           -> alive
    suspect_after <= silent < dead_after -> suspect
    silent >= dead_after                 -> dead (a tombstone from last_advance + dead_after)

Both thresholds grow with the swarm's size (`size_allowance`): in a large swarm heartbeats
reach a peer through several hops, so healthy silences are longer.

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
