"""`FaultyTransport`: a `Transport` wrapper that injects network faults on the calling side.

Every peer that can be faulted (`--fault`, or the admin routes; others send straight through
HTTP) sends through its own wrapper, so faults on the caller's side cover both directions of
every link; no server-side twin is needed. All random choices come from one seeded
`random.Random`: each request draws a 64-bit sub-seed at entry (before any await) and takes
every decision for that request from it. The same seed and the same sequence of `request`
calls therefore give the same faults, however the requests interleave once they are running,
and changing one fault's probability does not reshuffle the others.

What a caller sees:
- partition: `PeerUnreachable` at once when source and destination are in different groups.
- drop: the request never reaches the peer. `drop_mode="timeout"` waits out the caller's
  deadline and raises `RequestTimeout` (a lost packet); `"refuse"` raises `PeerUnreachable` now.
- delay/jitter: latency before the request is sent; never past the deadline (`RequestTimeout`).
- bandwidth: the request body, then the response body, wait `len / rate` on a shared link per
  direction (concurrent requests queue behind each other, as on a real link).
- duplicate: the peer receives the request twice; the caller gets the first answer and the
  duplicate's answer or error is discarded (its task is owned and awaited in `close`).
- corrupt: 1-4 random bytes of the request body or of the response body are XOR-ed with a
  non-zero byte, so they always change.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import random
import time
from collections.abc import Awaitable, Callable
from typing import Any

from swarmnode.fault.inject.partition import is_blocked
from swarmnode.fault.inject.spec import FaultConfig, FaultSpecError
from swarmnode.gossip.errors import PeerUnreachable, RequestTimeout
from swarmnode.gossip.link import Parts, Transport, completed

log = logging.getLogger(__name__)

MAX_CORRUPT_BYTES = 4
_STAT_KEYS = (
    "requests",
    "partitioned",
    "dropped",
    "delayed",
    "throttled",
    "duplicated",
    "corrupted_requests",
    "corrupted_responses",
    "deadline_expired",
)


@dataclasses.dataclass(frozen=True)
class _Plan:
    """Every random decision for one request, drawn up front."""

    drop: bool
    delay: float
    duplicate: bool
    corrupt_request: bool
    corrupt_response: bool
    rng: random.Random  # for the corrupted byte positions and values


class FaultyTransport:
    """Wraps `inner` (any `Transport`) and injects the faults of a `FaultConfig`.

    `self_addr` is this peer's address as the others know it (partitions compare it as a
    string). `clock` and `sleep` are injectable so tests can run on a fake clock.
    """

    def __init__(
        self,
        inner: Transport,
        config: FaultConfig | None = None,
        seed: int | None = None,
        self_addr: str = "",
        *,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Awaitable[Any]] = asyncio.sleep,
    ) -> None:
        self._inner = inner
        self._config = FaultConfig() if config is None else _checked(config)
        self._rng = random.Random(seed)
        self._self_addr = self_addr
        self._clock = clock
        self._sleep = sleep
        self._stats = dict.fromkeys(_STAT_KEYS, 0)
        self._link_free = {"up": 0.0, "down": 0.0}  # clock time each direction is next idle
        self._duplicates: set[asyncio.Task[None]] = set()
        self._closed = False

    @property
    def config(self) -> FaultConfig:
        return self._config

    @property
    def inner(self) -> Transport:
        return self._inner

    def set_config(self, config: FaultConfig) -> None:
        """Replace the faults; requests already in flight keep the decisions they drew."""
        self._config = _checked(config)
        log.info("fault config for %s: %s", self._self_addr or "?", config.to_spec())

    def update(self, **changes: Any) -> FaultConfig:
        """Change some fields (numbers in config units or spec strings); returns the new config.

        Invalid changes raise `FaultSpecError` and leave the current config in place.
        """
        self.set_config(FaultConfig.from_dict({**self._config.to_dict(), **changes}))
        return self._config

    def clear(self) -> None:
        """Stop injecting faults."""
        self.set_config(FaultConfig())

    def stats(self) -> dict[str, int]:
        """Counts for the report and metrics: `requests` seen, and injected `partitioned`,
        `dropped`, `delayed`, `throttled` (transfers slowed by the bandwidth cap, each way),
        `duplicated`, `corrupted_requests`, `corrupted_responses`, and `deadline_expired`
        (injected latency or throttling that ran past the caller's deadline)."""
        return dict(self._stats)

    async def request(self, addr: str, route: str, body: bytes, *, timeout: float) -> bytes:
        config = self._config
        plan = self._draw(config)  # before any await: keeps the RNG sequence deterministic
        deadline = self._clock() + timeout
        self._stats["requests"] += 1
        if is_blocked(config.partition, self._self_addr, addr):
            self._stats["partitioned"] += 1
            raise PeerUnreachable(f"{addr}: partitioned from {self._self_addr!r} (injected)")
        if plan.drop:
            self._stats["dropped"] += 1
            if config.drop_mode == "refuse":
                raise PeerUnreachable(f"{addr}: connection refused (injected drop)")
            await self._sleep(max(0.0, deadline - self._clock()))
            raise RequestTimeout(f"{addr}{route}: no answer in {timeout:g}s (injected drop)")
        if plan.delay > 0:
            self._stats["delayed"] += 1
            await self._wait(plan.delay, deadline, addr, route)
        if config.bandwidth > 0:
            await self._transmit("up", len(body), config.bandwidth, deadline, addr, route)
        if plan.corrupt_request or plan.duplicate:  # both need every byte of the body now
            body = await completed(body)
        if plan.corrupt_request and len(body):
            self._stats["corrupted_requests"] += 1
            body = _flip_bytes(body, plan.rng)
        if plan.duplicate and not self._closed:
            self._stats["duplicated"] += 1
            self._spawn_duplicate(addr, route, body, deadline)
        remaining = deadline - self._clock()
        if remaining <= 0:
            self._stats["deadline_expired"] += 1
            raise RequestTimeout(f"{addr}{route}: deadline passed before sending (injected)")
        response = await self._inner.request(addr, route, body, timeout=remaining)
        if config.bandwidth > 0:
            await self._transmit("down", len(response), config.bandwidth, deadline, addr, route)
        if plan.corrupt_response and len(response):
            self._stats["corrupted_responses"] += 1
            response = _flip_bytes(response, plan.rng)
        return response

    async def close(self) -> None:
        """Cancel and await duplicates still in flight, then close the inner transport."""
        self._closed = True
        pending = list(self._duplicates)
        for task in pending:
            task.cancel()
        await asyncio.gather(*pending, return_exceptions=True)
        await self._inner.close()

    def _draw(self, config: FaultConfig) -> _Plan:
        rng = random.Random(self._rng.getrandbits(64))
        # Always draw the same number of values, in the same order, whatever the config.
        drop = rng.random() < config.drop
        jitter = rng.uniform(-config.jitter, config.jitter)
        duplicate = rng.random() < config.duplicate
        corrupt = rng.random() < config.corrupt
        on_request = rng.random() < 0.5
        return _Plan(
            drop=drop,
            delay=max(0.0, config.delay + jitter),
            duplicate=duplicate,
            corrupt_request=corrupt and on_request,
            corrupt_response=corrupt and not on_request,
            rng=rng,
        )

    async def _wait(self, seconds: float, deadline: float, addr: str, route: str) -> None:
        """Sleep `seconds`, but raise `RequestTimeout` at the deadline if that comes first."""
        left = deadline - self._clock()
        if seconds < left:
            await self._sleep(seconds)
            return
        await self._sleep(max(0.0, left))
        self._stats["deadline_expired"] += 1
        raise RequestTimeout(f"{addr}{route}: injected latency ran past the deadline")

    async def _transmit(
        self, direction: str, nbytes: int, rate: float, deadline: float, addr: str, route: str
    ) -> None:
        """Queue `nbytes` on this direction's link and wait until they have gone through."""
        now = self._clock()
        start = max(now, self._link_free[direction])
        end = start + nbytes / rate
        # A transfer cut off by its deadline stops occupying the link at the deadline.
        self._link_free[direction] = end if end <= deadline else max(start, deadline)
        if end > now:
            self._stats["throttled"] += 1
            await self._wait(end - now, deadline, addr, route)

    def _spawn_duplicate(self, addr: str, route: str, body: bytes, deadline: float) -> None:
        task = asyncio.create_task(self._send_duplicate(addr, route, body, deadline))
        self._duplicates.add(task)
        task.add_done_callback(self._duplicates.discard)

    async def _send_duplicate(self, addr: str, route: str, body: bytes, deadline: float) -> None:
        remaining = deadline - self._clock()
        if remaining <= 0:
            return
        try:
            await self._inner.request(addr, route, body, timeout=remaining)
        except Exception as exc:  # the duplicate's fate is irrelevant to the caller
            log.debug("duplicate %s%s failed: %s", addr, route, exc)


def _checked(config: FaultConfig) -> FaultConfig:
    if not isinstance(config, FaultConfig):
        raise FaultSpecError(f"expected a FaultConfig, got {type(config).__name__}")
    return config


def _flip_bytes(data: bytes | bytearray | memoryview | Parts, rng: random.Random) -> bytes:
    """A copy of `data` with 1..MAX_CORRUPT_BYTES distinct bytes XOR-ed with a non-zero value."""
    buf = bytearray(bytes(data) if isinstance(data, Parts) else data)  # an envelope's buffers
    count = rng.randint(1, min(MAX_CORRUPT_BYTES, len(buf)))
    for pos in rng.sample(range(len(buf)), count):
        buf[pos] ^= rng.randint(1, 255)
    return bytes(buf)
