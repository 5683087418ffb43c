"""`FaultyTransport` against a fake inner transport.

Most tests run on a fake clock whose `sleep` advances time instantly, so timing assertions are
exact and immune to CPU load; a few use the real monotonic clock with a lower bound only (plus a
generous upper bound) to check the wiring to `asyncio.sleep`.
"""

from __future__ import annotations

import asyncio
import time

import pytest
from swarmnode.fault.inject.spec import FaultConfig, FaultSpecError, parse_fault_spec
from swarmnode.fault.inject.transport import MAX_CORRUPT_BYTES, FaultyTransport
from swarmnode.gossip.errors import (
    PeerUnreachable,
    RemoteError,
    RequestTimeout,
    TransportError,
)

from tests.waiting import eventually

ME = "10.0.0.1:7000"
PEER = "10.0.0.2:7000"


class FakeInner:
    """Records calls and answers `answer + body`; optional per-call failure or blocking."""

    def __init__(self, answer: bytes = b"pong:") -> None:
        self.answer = answer
        self.calls: list[tuple[str, str, bytes, float]] = []
        self.fail_from_call: int | None = None  # calls with index >= this raise RemoteError
        self.block = asyncio.Event()
        self.block.set()
        self.closed = False

    async def request(self, addr: str, route: str, body: bytes, *, timeout: float) -> bytes:
        index = len(self.calls)
        self.calls.append((addr, route, bytes(body), timeout))
        await self.block.wait()
        if self.fail_from_call is not None and index >= self.fail_from_call:
            raise RemoteError("boom", status=500)
        return self.answer + bytes(body)

    async def close(self) -> None:
        self.closed = True


class FakeClock:
    """A monotonic clock that only moves when someone sleeps on it."""

    def __init__(self) -> None:
        self.now = 1000.0
        self.sleeps: list[float] = []

    def __call__(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        assert seconds >= 0
        self.sleeps.append(seconds)
        self.now += seconds
        await asyncio.sleep(0)


def faulty(
    spec: str = "", seed: int = 1, clock: FakeClock | None = None
) -> tuple[FaultyTransport, FakeInner, FakeClock]:
    inner, clock = FakeInner(), clock or FakeClock()
    transport = FaultyTransport(
        inner, parse_fault_spec(spec), seed, ME, clock=clock, sleep=clock.sleep
    )
    return transport, inner, clock


async def outcome(transport: FaultyTransport, body: bytes, timeout: float = 1.0) -> object:
    try:
        return await transport.request(PEER, "/v1/x", body, timeout=timeout)
    except TransportError as exc:
        return type(exc).__name__


async def test_no_faults_passes_requests_through_unchanged() -> None:
    transport, inner, clock = faulty()
    assert await transport.request(PEER, "/v1/ping", b"abc", timeout=2.0) == b"pong:abc"
    assert inner.calls == [(PEER, "/v1/ping", b"abc", 2.0)]
    assert clock.sleeps == []
    assert transport.stats()["requests"] == 1
    assert sum(transport.stats().values()) == 1


async def test_same_seed_same_faults_other_seed_other_faults() -> None:
    spec = "drop=0.3,drop_mode=refuse,corrupt=0.3,delay=10ms,jitter=5ms"
    bodies = [bytes([i % 251]) * 16 for i in range(200)]

    async def run(seed: int) -> tuple[list[object], list[float]]:
        transport, _, clock = faulty(spec, seed)
        return [await outcome(transport, b) for b in bodies], clock.sleeps

    (results, sleeps), again, other = await run(7), await run(7), await run(8)
    assert (results, sleeps) == again
    assert (results, sleeps) != other
    assert "PeerUnreachable" in results  # every kind of fault did happen
    assert any(
        isinstance(r, bytes) and r != b"pong:" + b for r, b in zip(results, bodies, strict=True)
    )
    assert len(set(sleeps)) > 1


async def test_drop_rate_is_within_binomial_bounds() -> None:
    transport, inner, _ = faulty("drop=0.2,drop_mode=refuse", seed=3)
    n = 2000
    results = [await outcome(transport, b"x") for _ in range(n)]
    dropped = results.count("PeerUnreachable")
    # mean 400, sd ~17.9: +-5 sd; with a fixed seed this is deterministic anyway.
    assert 310 <= dropped <= 490
    assert len(inner.calls) == n - dropped  # a dropped request never reaches the peer
    assert transport.stats()["dropped"] == dropped


async def test_drop_in_timeout_mode_costs_the_whole_deadline() -> None:
    transport, inner, clock = faulty("drop=1")
    start = clock.now
    with pytest.raises(RequestTimeout, match="injected drop"):
        await transport.request(PEER, "/v1/x", b"x", timeout=0.75)
    assert clock.now - start == pytest.approx(0.75)
    assert inner.calls == []


@pytest.mark.timeout(20)
async def test_drop_timeout_on_the_real_clock() -> None:
    transport = FaultyTransport(FakeInner(), parse_fault_spec("drop=1"), 0, ME)
    start = time.monotonic()
    with pytest.raises(RequestTimeout):
        await transport.request(PEER, "/v1/x", b"x", timeout=0.2)
    elapsed = time.monotonic() - start
    assert 0.19 <= elapsed < 5.0


async def test_delay_with_jitter_stays_in_its_window_and_varies() -> None:
    transport, inner, clock = faulty("delay=50ms,jitter=10ms")
    for _ in range(50):
        await transport.request(PEER, "/v1/x", b"x", timeout=1.0)
    assert len(clock.sleeps) == 50
    assert all(0.04 <= s <= 0.06 for s in clock.sleeps)
    assert max(clock.sleeps) - min(clock.sleeps) > 0.01  # jitter actually varies the delay
    # The inner call gets only what is left of the deadline after the delay.
    assert all(timeout <= 1.0 - 0.04 + 1e-9 for *_, timeout in inner.calls)


@pytest.mark.timeout(20)
async def test_delay_adds_real_time() -> None:
    transport = FaultyTransport(FakeInner(), parse_fault_spec("delay=100ms"), 0, ME)
    start = time.monotonic()
    assert await transport.request(PEER, "/v1/x", b"x", timeout=5.0) == b"pong:x"
    elapsed = time.monotonic() - start
    assert 0.095 <= elapsed < 4.0


@pytest.mark.timeout(20)
async def test_delay_never_exceeds_the_callers_deadline() -> None:
    inner = FakeInner()
    transport = FaultyTransport(inner, parse_fault_spec("delay=30s"), 0, ME)
    start = time.monotonic()
    with pytest.raises(RequestTimeout):
        await transport.request(PEER, "/v1/x", b"x", timeout=0.2)
    assert time.monotonic() - start < 5.0
    assert inner.calls == []
    assert transport.stats()["deadline_expired"] == 1


async def test_duplicate_sends_twice_and_returns_the_first_answer() -> None:
    transport, inner, _ = faulty("duplicate=1")
    inner.fail_from_call = 1  # the duplicate fails: the caller must not notice
    assert await transport.request(PEER, "/v1/x", b"dup", timeout=1.0) == b"pong:dup"
    await eventually(lambda: len(inner.calls) == 2, 5, "both copies", every=0.001)
    assert [c[2] for c in inner.calls] == [b"dup", b"dup"]
    await eventually(lambda: not transport._duplicates, 5, "the duplicate done", every=0.001)
    assert transport.stats()["duplicated"] == 1


async def test_close_cancels_and_awaits_duplicates_in_flight() -> None:
    transport, inner, _ = faulty("duplicate=1")
    inner.block.clear()
    first = asyncio.create_task(transport.request(PEER, "/v1/x", b"x", timeout=60.0))
    await eventually(lambda: len(inner.calls) == 2, 5, "both copies", every=0.001)
    first.cancel()
    with pytest.raises(asyncio.CancelledError):
        await first
    pending = list(transport._duplicates)
    assert len(pending) == 1
    await transport.close()
    assert all(task.done() for task in pending)
    assert inner.closed


async def test_corrupt_flips_a_few_bytes_of_request_or_response() -> None:
    transport, inner, _ = faulty("corrupt=1", seed=5)
    body = bytes(range(64))
    changed_requests = changed_responses = 0
    for _ in range(100):
        inner.calls.clear()
        response = await transport.request(PEER, "/v1/x", body, timeout=1.0)
        sent = inner.calls[0][2]
        expected = b"pong:" + sent
        assert len(sent) == len(body) and len(response) == len(expected)
        request_diff = sum(a != b for a, b in zip(sent, body, strict=True))
        response_diff = sum(a != b for a, b in zip(response, expected, strict=True))
        # Exactly one side is corrupted, in 1..MAX_CORRUPT_BYTES bytes.
        assert (request_diff == 0) != (response_diff == 0)
        assert 1 <= request_diff + response_diff <= MAX_CORRUPT_BYTES
        changed_requests += request_diff > 0
        changed_responses += response_diff > 0
    assert changed_requests > 20 and changed_responses > 20
    stats = transport.stats()
    assert (stats["corrupted_requests"], stats["corrupted_responses"]) == (
        changed_requests,
        changed_responses,
    )


async def test_partition_blocks_across_groups_and_allows_within() -> None:
    transport, inner, _ = faulty(f"partition={ME}+{PEER}|10.0.0.3:7000")
    assert await transport.request(PEER, "/v1/x", b"x", timeout=1.0) == b"pong:x"
    for other in ("10.0.0.3:7000", "10.0.0.9:7000"):  # another group, and the unlisted rest
        with pytest.raises(PeerUnreachable, match="partitioned"):
            await transport.request(other, "/v1/x", b"x", timeout=1.0)
    assert [c[0] for c in inner.calls] == [PEER]
    assert transport.stats()["partitioned"] == 2


async def test_bandwidth_cap_charges_request_and_response_bytes() -> None:
    transport, inner, clock = faulty("bandwidth=1KB/s")
    inner.answer = b""  # the response is the echoed body: 500 bytes each way
    start = clock.now
    await transport.request(PEER, "/v1/x", b"x" * 500, timeout=5.0)
    assert clock.now - start == pytest.approx(1.0)  # 500 B up + 500 B down at 1000 B/s


async def test_bandwidth_is_shared_by_concurrent_requests() -> None:
    transport, inner, clock = faulty("bandwidth=1KB/s")
    inner.answer = b""
    start = clock.now
    finished: list[float] = []

    async def one() -> None:
        await transport.request(PEER, "/v1/x", b"y" * 250, timeout=5.0)
        finished.append(clock.now - start)

    await asyncio.gather(one(), one())
    # Two 250-byte uploads queue on one link: the second finishes after 0.5 s, not 0.25 s.
    assert max(finished) >= 0.75 - 1e-9


async def test_bandwidth_past_the_deadline_times_out() -> None:
    transport, inner, clock = faulty("bandwidth=1KB/s")
    start = clock.now
    with pytest.raises(RequestTimeout):
        await transport.request(PEER, "/v1/x", b"z" * 10_000, timeout=2.0)
    assert clock.now - start == pytest.approx(2.0)
    assert inner.calls == []


@pytest.mark.timeout(20)
async def test_bandwidth_on_the_real_clock() -> None:
    inner = FakeInner(answer=b"")
    transport = FaultyTransport(inner, parse_fault_spec("bandwidth=100KB/s"), 0, ME)
    start = time.monotonic()
    await transport.request(PEER, "/v1/x", b"b" * 10_000, timeout=10.0)
    elapsed = time.monotonic() - start
    assert 0.19 <= elapsed < 5.0  # 10 kB each way at 100 kB/s


async def test_runtime_config_changes() -> None:
    transport, _, _ = faulty()
    transport.set_config(FaultConfig(drop=1.0, drop_mode="refuse"))
    assert await outcome(transport, b"x") == "PeerUnreachable"
    assert transport.update(drop=0, delay="20ms") == FaultConfig(drop_mode="refuse", delay=0.02)
    assert await outcome(transport, b"x") == b"pong:x"
    before = transport.config
    with pytest.raises(FaultSpecError, match=r"drop=2: probability must be in \[0, 1\]"):
        transport.update(drop=2)
    with pytest.raises(FaultSpecError, match="unknown fault"):
        transport.update(slow=3)
    with pytest.raises(FaultSpecError):
        transport.set_config({"drop": 0.5})  # type: ignore[arg-type]
    assert transport.config == before
    transport.clear()
    assert transport.config == FaultConfig()


async def test_inner_errors_pass_through_unchanged() -> None:
    transport, inner, _ = faulty("delay=1ms")
    inner.fail_from_call = 0
    with pytest.raises(RemoteError) as info:
        await transport.request(PEER, "/v1/x", b"x", timeout=1.0)
    assert info.value.status == 500
