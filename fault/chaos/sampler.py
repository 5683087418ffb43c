"""Sampling for a chaos run: every peer's `/v1/status`, and the model distances, on a clock.

Two loops the runner owns for the length of the timeline: `status_loop` every `sample_every`
seconds (what the assertions read), `params_loop` every `params_every` seconds (how far apart
the honest models lie, and where what each byzantine peer serves lies from them). A loop that
falls behind skips samples rather than bursting to catch up.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Callable
from typing import Any

import aiohttp
from swarmnode.fault.chaos import probe
from swarmnode.fault.chaos.scenario import Scenario
from swarmnode.fault.chaos.supervisor import ScenarioPeer
from swarmnode.gossip.auth import OperatorKey, Signer

PARAMS_TIMEOUT = 5.0


class Clock:
    """The run's time: seconds since t = 0, when every initial peer was ready."""

    def __init__(self) -> None:
        self.t0: float | None = None

    def start(self) -> None:
        self.t0 = time.monotonic()

    def now(self) -> float:
        return 0.0 if self.t0 is None else time.monotonic() - self.t0

    async def sleep_until(self, t: float) -> None:
        delay = t - self.now()
        if delay > 0:
            await asyncio.sleep(delay)


class Sampler:
    """What the peers report over the run: `samples`, `last_status`, `distances`, `notes`.

    `before_sample` runs before each status sample (the runner records peers that died)."""

    def __init__(
        self,
        scenario: Scenario,
        peers: dict[str, ScenarioPeer],
        honest: set[str],
        clock: Clock,
        *,
        signer: Signer | None,
        operator: OperatorKey | None = None,
        before_sample: Callable[[], None],
        say: Callable[[str], None],
        quiet: bool,
    ) -> None:
        self.scenario = scenario
        self.peers = peers
        self.honest = honest
        self.clock = clock
        self.signer = signer
        self.operator = operator  # reads the models through admin/params
        self.before_sample = before_sample
        self.say = say
        self.quiet = quiet
        self.session: aiohttp.ClientSession | None = None
        self.samples: dict[str, list[dict[str, Any]]] = {p.name: [] for p in scenario.peers}
        self.last_status: dict[str, dict[str, Any]] = {}
        self.distances: list[dict[str, Any]] = []
        self.notes: list[str] = []

    async def status_loop(self) -> None:
        every = self.scenario.sample_every
        k = 0
        while True:
            await self.clock.sleep_until(k * every)
            await self.sample_once()
            k = max(k + 1, math.ceil(self.clock.now() / every))  # fell behind: skip, never burst

    async def sample_once(self) -> None:
        self.before_sample()
        t = round(self.clock.now(), 3)
        started = [p for p in self.peers.values() if p.state != "absent"]
        samples = await asyncio.gather(*(self._sample_peer(p, t) for p in started))
        for p, sample in zip(started, samples, strict=True):
            self.samples[p.name].append(sample)
        if not self.quiet:
            self.say(progress_line(t, {p.name: s for p, s in zip(started, samples, strict=True)}))

    async def _sample_peer(self, p: ScenarioPeer, t: float) -> dict[str, Any]:
        if p.state in ("down", "frozen", "starting"):
            return {"t": t, "ok": False, "why": p.state}
        assert self.session is not None and p.addr is not None
        status, why = await probe.fetch_status(self.session, p.addr, self.scenario.sample_timeout)
        if status is None:
            return {"t": t, "ok": False, "why": why}
        self.last_status[p.name] = status
        return {"t": t, "ok": True, **probe.condense(status)}

    async def params_loop(self) -> None:
        every = self.scenario.params_every
        k = 0
        while True:
            await self.clock.sleep_until(k * every)
            await self.params_once()
            k = max(k + 1, math.ceil(self.clock.now() / every))

    async def params_once(self) -> None:
        """One distance sample over the honest running peers.

        Byzantine peers that are running are pulled too: how far what they serve lies from the
        nearest honest model shows whether an attack is really being served."""
        assert self.session is not None
        t = round(self.clock.now(), 3)
        peers = [p for p in self.peers.values() if p.state == "running"]
        timeout = max(PARAMS_TIMEOUT, self.scenario.sample_timeout)
        pulled = await asyncio.gather(
            *(
                probe.fetch_params(
                    self.session, p.addr or "", timeout, self.signer, operator=self.operator
                )
                for p in peers
            )
        )
        missing = {p.name: why for p, (vec, why) in zip(peers, pulled, strict=True) if vec is None}
        got = [(p.name, vec) for p, (vec, _) in zip(peers, pulled, strict=True) if vec is not None]
        honest = [vec for name, vec in got if name in self.honest]
        served = {name: vec for name, vec in got if name not in self.honest}
        entry: dict[str, Any] = await asyncio.to_thread(distance_entry, honest, served)
        entry.update(t=t, missing=missing)
        self.distances.append(entry)


def progress_line(t: float, samples: dict[str, dict[str, Any]]) -> str:
    """`t=  12.0s  a 340 91.2%  b frozen  c timeout` -- one line per sample interval."""
    parts = [f"t={t:6.1f}s"]
    for name, s in samples.items():
        if s.get("ok"):
            acc = s.get("acc")
            acc_text = "-" if acc is None else f"{100 * acc:.1f}%"
            parts.append(f"{name} {s.get('step')} {acc_text}")
        else:
            parts.append(f"{name} {s.get('why', '?').split(':')[0]}")
    return "  ".join(parts)


def distance_entry(honest: list[Any], served: dict[str, Any]) -> dict[str, Any]:
    """`{"max": honest spread, "n": honest count[, "byzantine": {name: its position}]}` (see
    `probe.relative_position`); numpy work over whole models: run it in a worker thread."""
    entry: dict[str, Any] = {"max": probe.max_pairwise_distance(honest), "n": len(honest)}
    if served:
        entry["byzantine"] = {
            name: probe.relative_position(vec, honest) for name, vec in served.items()
        }
    return entry
