"""What each link to a partner looks like from here: latency, throughput, bytes, in flight.

`MeasuringTransport` wraps any `Transport` and times every request by destination address:

- latency: an EWMA of the duration of *small* requests (body and answer under `SMALL_BYTES`:
  membership gossip, pull requests, control messages), i.e. round-trip time plus the peer's
  handling; a request that fails counts as its timeout.
- throughput: an EWMA of (bytes out + bytes in) / duration over *bulk* requests (parameter
  exchanges), in bits per second.
- bytes sent and received, requests, failures, and the requests in flight now;
- exchanges (answered requests on a model route, `params` or `pushpull`) and when the last one
  ended: who mixed with whom lately, whatever the model's size (a small model's exchange is
  below `SMALL_BYTES` and counts as latency, not throughput);
- failures in a row, which back the partner off (`backoff`, gossip/link/backoff.py).

A first-answer deadline: a `gossip` or `pushpull` request to a partner that is not
proven for its kind (`Backoff.proven`: never answered, or its latest request failed) gets
`FIRST_FACTOR` x the typical answered request of that kind (an EWMA over all partners), at
least `FIRST_MIN_S`, at most the caller's deadline, instead of the whole deadline, so that a
member that accepts connections and never answers costs an honest round a few typical exchanges,
not the whole exchange deadline (docs/security.md, "Bounds on tables, bodies and partners").
The short deadline doubles with each failure in a row of
that partner, so an honest one on a slower link than the rest gets the whole deadline after a
few tries (each after its back-off) and is proven then. Before any request of a kind was answered the caller's
deadline stands (a young swarm's first exchanges), and pulls (`params`: state sync, which may
wait long on purpose) keep theirs.

A tuned deadline: a `pushpull` to a proven partner gets `exchange_deadline` of its own link,
bytes each way / its measured throughput x `TUNE_MARGIN` + its round trip, within
[`TUNE_FLOOR_S`, the caller's deadline]: the fixed `exchange-timeout` is the cap, a loopback
partner that freezes costs a short deadline, and a 100 MB model on a 20 Mbit/s link is given the
time that link takes (up to the cap), not one made for loopback. Without a throughput measured
yet, a bulk body keeps the cap.

For benchmarks only: `SNBENCH_FIXED_DEADLINE=1` in a peer's environment turns the tuning
off (every push-pull keeps the caller's fixed deadline, as before the tuning), so that a lab run
can set the old deadline against the new one on the same links (scripts/netlab/deadlines.py).
No option names it, and it is outside the `SWARMNODE_` prefix of the settings on purpose: it is
not a setting for a swarm.

`prefer_fast` turns them into sampling weights: a partner's weight is the fastest partner's
expected exchange time over its own, floored at `floor`, so that quick partners are picked more
often and a slow one still gets at least `floor` of a quick one's share (never starved). A partner
with no measurement yet gets weight 1 (it is tried, then measured).
"""

from __future__ import annotations

import asyncio
import os
import random
import time
from collections.abc import Sequence
from dataclasses import dataclass

from swarmnode.gossip.errors import CROSSED, RemoteError, TransportError
from swarmnode.gossip.link.backoff import BULK, Backoff, kind_of
from swarmnode.gossip.link.transport import Transport

SMALL_BYTES = 64 * 1024
ALPHA = 0.3  # EWMA weight of the newest sample
TYPICAL_EXCHANGE_BYTES = 8 << 20  # what a weight assumes an exchange moves, when unknown
FIRST_ROUTES = frozenset({"gossip", "pushpull"})  # the routes of sampled partners
FIRST_FACTOR = 4.0  # an unproven partner's deadline, in typical answered requests of the kind
FIRST_MIN_S = 0.25
TUNE_ROUTES = frozenset({"pushpull"})  # pulls (state sync) keep their caller's long deadline
TUNE_MARGIN = 4.0  # x the expected transfer time: a busy moment, a slower answer
TUNE_FLOOR_S = 1.0  # never shorter: a loaded 2-core host's scheduling, a GC pause
# Links remembered, the least recently used forgotten first: the addresses a peer dials come
# from the member table (at most 1,024 members), but over a long run its churn, a sybil flood's
# above all, names new ones without end
MAX_LINKS = 4096
FIXED_DEADLINE_ENV = "SNBENCH_FIXED_DEADLINE"  # benchmarks only: the tuning off


def tuning_on() -> bool:
    """False where the benchmark switch `FIXED_DEADLINE_ENV` is set to 1 (see the module doc)."""
    return os.environ.get(FIXED_DEADLINE_ENV, "") != "1"


def exchange_deadline(
    nbytes: int,
    rtt_s: float | None,
    throughput_bps: float | None,
    cap: float,
    *,
    margin: float = TUNE_MARGIN,
    floor: float = TUNE_FLOOR_S,
) -> float:
    """The deadline of an exchange moving `nbytes` (both ways) over a link measured at
    `rtt_s` and `throughput_bps` (bits per second): nbytes / throughput x margin + rtt, within
    [floor, cap]. A body too small to be measured as throughput (`SMALL_BYTES`: its exchanges
    are timed as round trips) takes margin x its round trip; a large one on a link with no
    throughput measured yet takes the cap."""
    if nbytes < SMALL_BYTES:
        want = margin * rtt_s if rtt_s is not None else cap
    elif throughput_bps:
        want = margin * 8 * nbytes / throughput_bps + (rtt_s or 0.0)
    else:
        want = cap
    return min(cap, max(floor, want))


@dataclass
class LinkStat:
    addr: str
    rtt_s: float | None = None
    throughput_bps: float | None = None
    bytes_sent: int = 0
    bytes_received: int = 0
    requests: int = 0
    failures: int = 0
    inflight: int = 0
    last_s: float = 0.0  # monotonic time of the last completed request
    exchanges: int = 0  # answered requests on a model route (params, pushpull)
    last_exchange_s: float = 0.0  # monotonic time the last of them ended

    def expected_exchange_s(self, nbytes: int) -> float | None:
        if self.rtt_s is None and self.throughput_bps is None:
            return None
        rtt = self.rtt_s or 0.0
        bw = self.throughput_bps
        return rtt + (8 * nbytes / bw if bw else 0.0)

    def as_dict(self) -> dict[str, object]:
        return {
            "addr": self.addr,
            "rtt_ms": None if self.rtt_s is None else round(self.rtt_s * 1000, 2),
            "mbit_s": None if self.throughput_bps is None else round(self.throughput_bps / 1e6, 2),
            "bytes_sent": self.bytes_sent,
            "bytes_received": self.bytes_received,
            "requests": self.requests,
            "failures": self.failures,
            "inflight": self.inflight,
            "last_s_ago": _ago(self.last_s),
            "exchanges": self.exchanges,
            "exchange_s_ago": _ago(self.last_exchange_s),
        }


def _ago(t: float) -> float | None:
    return round(time.monotonic() - t, 1) if t else None


def _ewma(old: float | None, new: float) -> float:
    return new if old is None else (1 - ALPHA) * old + ALPHA * new


class MeasuringTransport:
    """A `Transport` that measures every request by destination (see the module doc)."""

    def __init__(self, inner: Transport, backoff: Backoff | None = None) -> None:
        self.inner = inner
        self.links: dict[str, LinkStat] = {}
        # partners that do not answer are sampled rarely (gossip/link/backoff.py); fed here, where
        # every request of the peer passes, and read by the samplers
        self.backoff = backoff or Backoff()
        self.typical_s: dict[str, float] = {}  # kind -> EWMA of answered requests' durations
        self.first_deadlines = 0  # requests given the short first-answer deadline
        self.tuned_deadlines = 0  # proven partners' push-pulls given their link's deadline
        self.tune = tuning_on()  # read once: a peer's deadlines do not change rule mid-run

    def deadline(self, addr: str, route: str, timeout: float) -> float:
        """`timeout`, or the short first-answer deadline for an unproven partner (see above)."""
        kind = kind_of(route)
        typical = self.typical_s.get(kind)
        if route not in FIRST_ROUTES or typical is None or self.backoff.proven(addr, kind):
            return timeout
        tries = min(self.backoff.streak(addr, kind), 16)
        return min(timeout, max(FIRST_MIN_S, FIRST_FACTOR * typical) * 2**tries)

    def tuned_deadline(self, addr: str, route: str, timeout: float, nbytes: int) -> float:
        """`deadline`, and for a proven partner's push-pull of `nbytes` each way the deadline
        its link's figures call for (`exchange_deadline`, capped at `timeout`)."""
        link = self.links.get(addr)
        tuned = self.tune and route in TUNE_ROUTES
        if tuned and link is not None and self.backoff.proven(addr, kind_of(route)):
            return exchange_deadline(2 * nbytes, link.rtt_s, link.throughput_bps, timeout)
        return self.deadline(addr, route, timeout)

    def forget(self, addr: str) -> None:
        """Start the link to `addr` afresh: a partner that came back (a new life at the
        address) is a new process, and the last one's figures are not its own; above all the
        timeouts its death cost, counted as latency (a 3 ms link shown as 999.8 ms)."""
        self.links.pop(addr, None)

    def stat(self, addr: str) -> LinkStat:
        """The link to `addr`, now the most recently used (`MAX_LINKS`)."""
        s = self.links.pop(addr, None)
        if s is None:
            s = LinkStat(addr)
            if len(self.links) >= MAX_LINKS:
                del self.links[next(iter(self.links))]  # the least recently used
        self.links[addr] = s
        return s

    async def request(self, addr: str, route: str, body: bytes, *, timeout: float) -> bytes:
        s = self.stat(addr)
        s.inflight += 1
        s.requests += 1
        t0 = time.perf_counter()
        sent = len(body)
        s.bytes_sent += sent  # on its way (counted whether or not an answer comes)
        short = self.tuned_deadline(addr, route, timeout, sent)
        if short < timeout:
            proven = self.backoff.proven(addr, kind_of(route))
            self.tuned_deadlines += proven
            self.first_deadlines += not proven
            timeout = short
        try:
            answer = await self.inner.request(addr, route, body, timeout=timeout)
        except RemoteError as exc:
            if exc.status == CROSSED:  # alive, answering, and about to serve ours: no failure
                self.backoff.answered(addr, kind_of(route))
                raise
            self._failed(s, addr, route, sent, timeout)
            raise
        except TransportError:
            self._failed(s, addr, route, sent, timeout)
            raise
        except asyncio.CancelledError:
            # a round that went on without an unproven partner (exchange: `_answers`): a failure
            # of that partner; a proven one (or a cancel at shutdown of one) keeps its standing
            if not self.backoff.proven(addr, kind_of(route)):
                s.failures += 1
                self.backoff.failed(addr, kind_of(route))
            raise
        finally:
            s.inflight -= 1
        kind = kind_of(route)
        self.backoff.answered(addr, kind)
        took = max(time.perf_counter() - t0, 1e-6)
        if route in FIRST_ROUTES:
            self.typical_s[kind] = _ewma(self.typical_s.get(kind), took)
        got = len(answer)
        s.bytes_received += got
        s.last_s = time.monotonic()
        if kind_of(route) == BULK:
            s.exchanges += 1
            s.last_exchange_s = s.last_s
        if sent < SMALL_BYTES and got < SMALL_BYTES:
            s.rtt_s = _ewma(s.rtt_s, took)
        else:
            s.throughput_bps = _ewma(s.throughput_bps, 8 * (sent + got) / took)
        return answer

    async def close(self) -> None:
        await self.inner.close()

    def _failed(self, s: LinkStat, addr: str, route: str, sent: int, timeout: float) -> None:
        s.failures += 1
        self.backoff.failed(addr, kind_of(route))
        if sent < SMALL_BYTES:
            s.rtt_s = _ewma(s.rtt_s, timeout)

    def snapshot(self, known: dict[str, str] | None = None) -> list[dict[str, object]]:
        """Every link as a dict (for /v1/status), with the partner's id where `known` names it."""
        out = []
        for addr in sorted(self.links):
            d = self.links[addr].as_dict()
            d["peer_id"] = (known or {}).get(addr)
            out.append(d)
        return out


def prefer_fast(
    candidates: Sequence[tuple[str, str]],
    links: dict[str, LinkStat],
    k: int,
    rng: random.Random,
    *,
    floor: float = 0.25,
    nbytes: int = TYPICAL_EXCHANGE_BYTES,
) -> list[tuple[str, str]]:
    """Up to k distinct (peer_id, addr), drawn without replacement with link-aware weights."""
    if not 0 < floor <= 1:
        raise ValueError(f"`floor` must be in (0, 1], got {floor}")
    times = {}
    for _, addr in candidates:
        st = links.get(addr)
        t = None if st is None else st.expected_exchange_s(nbytes)
        times[addr] = t
    known = [t for t in times.values() if t]
    fastest = min(known) if known else None
    pool = list(candidates)
    weights = [
        1.0 if (t := times[addr]) is None or fastest is None else max(floor, fastest / t)
        for _, addr in pool
    ]
    picked: list[tuple[str, str]] = []
    while pool and len(picked) < k:
        i = rng.choices(range(len(pool)), weights=weights)[0]
        picked.append(pool.pop(i))
        weights.pop(i)
    return picked
