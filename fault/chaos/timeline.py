"""The timeline of a chaos run: each scheduled event carried out, at its time, and recorded.

Lifecycle events (kill, terminate, freeze, thaw, restart, join) go to the supervisor; fault,
partition, byzantine and slowdown events are admin requests to the peers (signed by the run's
operator key); hostile events start an attacker (swarmnode.fault.chaos.hostile). A partition is sent to every running peer as a fault spec by current
addresses, so a peer that restarts (new address) or thaws (missed changes) is sent it again.
Every entry records the actual time, and an event that could not be carried out records why.
"""

from __future__ import annotations

import dataclasses
import signal
from collections.abc import Callable
from typing import Any

import aiohttp
from swarmnode.fault.chaos import probe
from swarmnode.fault.chaos.errors import ChaosError
from swarmnode.fault.chaos.hostile import HostileActors
from swarmnode.fault.chaos.sampler import Clock
from swarmnode.fault.chaos.scenario import Event
from swarmnode.fault.chaos.supervisor import ScenarioPeer, Supervisor
from swarmnode.fault.inject import FaultConfig, make_partition, parse_fault_spec
from swarmnode.gossip.auth import OperatorKey, Signer

ADMIN_TIMEOUT = 3.0


class Timeline:
    """Carries out events; `entries` is the executed timeline the report and assertions read."""

    def __init__(
        self,
        supervisor: Supervisor,
        clock: Clock,
        *,
        operator: OperatorKey | None,
        say: Callable[[str], None],
        honest: set[str] | None = None,
        signer: Signer | None = None,
    ) -> None:
        self.supervisor = supervisor
        self.peers = supervisor.peers
        self.clock = clock
        self.operator = operator
        self.say = say
        self.session: aiohttp.ClientSession | None = None
        self.entries: list[dict[str, Any]] = []
        self.partition: tuple[tuple[str, ...], ...] = ()
        self.peer_faults: dict[str, FaultConfig] = {}
        self._faults_touched = False
        honest = set(self.peers) if honest is None else honest
        self.hostile = HostileActors(
            self.peers,
            honest,
            clock,
            signer=signer,
            say=say,
            secret=supervisor.secret,
            node=supervisor.scenario.node,
        )

    def record_deaths(self) -> None:
        """Record a child that died without being told to."""
        for p in self.supervisor.newly_dead():
            if p.expected_exit:
                continue
            entry = {
                "t": round(self.clock.now(), 3),
                "index": None,
                "action": "died",
                "peer": p.name,
                "label": f"{p.name} died",
                "ok": False,
                "exit_code": p.exit_codes[-1],
                "log_tail": p.log_tail(),
            }
            self.entries.append(entry)
            self.say(
                f"chaos: t={entry['t']:.1f}s peer {p.name} died unexpectedly "
                f"(exit code {entry['exit_code']}): {entry['log_tail'] or 'no output'}"
            )

    async def do_event(self, index: int, e: Event) -> None:
        self.record_deaths()
        entry: dict[str, Any] = {
            "t": round(self.clock.now(), 3),
            "index": index,
            "scheduled": e.at,
            "action": e.action,
            "peer": e.peer,
            "id": e.id,
            "label": e.label,
        }
        try:
            detail = await getattr(self, f"_ev_{e.action}")(e)
            entry["ok"] = True
            if detail:
                entry["detail"] = detail
        except ChaosError as exc:
            entry["ok"] = False
            entry["error"] = str(exc)
        self.entries.append(entry)
        outcome = entry.get("detail", "") if entry["ok"] else f"FAILED: {entry['error']}"
        self.say(f"chaos: t={entry['t']:.1f}s {e.label} {outcome}".rstrip())

    def _peer(self, e: Event, *states: str) -> ScenarioPeer:
        assert e.peer is not None  # the scenario parser guarantees it for peer actions
        p = self.peers[e.peer]
        if p.state not in states:
            raise ChaosError(f"peer {p.name} is {p.state}, not {' or '.join(states)}")
        return p

    async def _ev_kill(self, e: Event) -> str:
        return await self.supervisor.kill(self._peer(e, "running", "frozen"))

    async def _ev_terminate(self, e: Event) -> str:
        return await self.supervisor.terminate(self._peer(e, "running"))

    async def _ev_freeze(self, e: Event) -> str:
        p = self._peer(e, "running")
        p.signal(signal.SIGSTOP)
        p.state = "frozen"
        return ""

    async def _ev_thaw(self, e: Event) -> str:
        p = self._peer(e, "frozen")
        p.signal(signal.SIGCONT)
        p.state = "running"
        if self._faults_touched:  # it missed the fault changes made while it was frozen
            await self._push_faults([p])
        return ""

    async def _ev_restart(self, e: Event) -> str:
        p = self._peer(e, "down", "absent")
        took = await self.supervisor.restart(p)
        if self._faults_touched:  # its address is new: every partition spec must learn it
            await self._push_faults(self.supervisor.running())
        return f"ready in {took:.1f}s as {p.peer_id} at {p.addr}"

    _ev_join = _ev_restart

    async def _ev_partition(self, e: Event) -> str:
        self.partition = e.groups
        self._faults_touched = True
        return await self._push_faults(self.supervisor.running())

    async def _ev_heal(self, e: Event) -> str:
        self.partition = ()
        return await self._push_faults(self.supervisor.running())

    async def _ev_fault(self, e: Event) -> str:
        p = self._peer(e, "running")
        self.peer_faults[p.name] = parse_fault_spec(e.spec or "none")
        self._faults_touched = True
        return await self._push_faults([p])

    async def _ev_byzantine(self, e: Event) -> str:
        p = self._peer(e, "running")
        kind = None if (e.kind or "none").lower() == "none" else e.kind
        return await self._admin(p, "byzantine", probe.byzantine_body(kind))

    async def _ev_slowdown(self, e: Event) -> str:
        p = self._peer(e, "running")
        return await self._admin(p, "slowdown", probe.slowdown_body(e.factor or 1.0))

    async def _ev_hostile(self, e: Event) -> str:
        return self.hostile.start(e, self._peer(e, "running"))

    def fault_for(self, name: str) -> FaultConfig:
        """The peer's own fault spec with the current partition (by current addresses)."""
        base = self.peer_faults.get(name, FaultConfig())
        groups = [
            [self.peers[m].addr for m in group if self.peers[m].addr] for group in self.partition
        ]
        return dataclasses.replace(base, partition=make_partition([g for g in groups if g]))

    async def _push_faults(self, targets: list[ScenarioPeer]) -> str:
        errors = []
        for p in targets:
            try:
                await self._admin(p, "fault", probe.fault_body(self.fault_for(p.name)))
            except ChaosError as exc:
                errors.append(str(exc))
        if errors:
            raise ChaosError("; ".join(errors))
        return f"sent to {', '.join(p.name for p in targets)}"

    async def _admin(self, p: ScenarioPeer, route: str, body: bytes) -> str:
        assert self.session is not None and p.addr is not None
        why = await probe.post_admin(
            self.session, p.addr, route, body, ADMIN_TIMEOUT, operator=self.operator
        )
        if why:
            raise ChaosError(f"admin/{route} on {p.name}: {why}")
        return ""
