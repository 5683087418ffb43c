"""The hostile actors of a chaos run (`action = "hostile"`): each attack an owned task.

An event starts one actor of swarmnode.fault.hostile against its target peer; it runs for the
event's `duration`, or until the timeline ends, when `stop()` cancels the ones still running and
awaits them all. When the swarm has a secret the attacker holds it (an insider: the worst case
the membership and request layers must survive). Each actor's report, with the times it ran
(from the end of its preparation, `ready_s` after the event, to its end), goes into `reports`
(the report's `hostile` list), which the hostile assertions read.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from swarmnode.fault.chaos.errors import ChaosError
from swarmnode.fault.chaos.sampler import Clock
from swarmnode.fault.chaos.scenario import Event
from swarmnode.fault.chaos.supervisor import ScenarioPeer
from swarmnode.fault.hostile import (
    DragError,
    DragInsider,
    ForgedRecords,
    SlowBodies,
    SybilFlood,
    hidden_biases,
    source_addresses,
)
from swarmnode.gossip.auth import Signer


class HostileActors:
    def __init__(
        self,
        peers: dict[str, ScenarioPeer],
        honest: set[str],
        clock: Clock,
        *,
        signer: Signer | None,
        say: Callable[[str], None],
        secret: str | None = None,
        node: dict[str, Any] | None = None,
    ) -> None:
        self.peers, self.honest, self.clock = peers, honest, clock
        self.signer, self.say = signer, say
        self.secret = secret  # the drag signs as a member of its own: it needs the secret itself
        self.node = node or {}  # the scenario's [node] flags: the drag aims at their model
        self.reports: list[dict[str, Any]] = []
        self._tasks: list[asyncio.Task[None]] = []

    def start(self, e: Event, target: ScenarioPeer) -> str:
        assert target.addr is not None and e.kind is not None
        actor = self._actor(e, target)
        name = f"chaos-hostile-{len(self._tasks)}"
        self._tasks.append(asyncio.create_task(self._run(actor, e), name=name))
        return f"{e.count} x {e.kind} for {e.duration:g} s"

    def _actor(self, e: Event, target: ScenarioPeer) -> Any:
        addr = target.addr or ""
        if e.kind == SlowBodies.kind:
            return SlowBodies(addr, e.count)
        if e.kind == SybilFlood.kind:
            sources = source_addresses(e.source_net, e.sources) if e.sources else None
            return SybilFlood(
                addr,
                e.count,
                e.rate,
                signer=self.signer,
                observers=self._observers(),
                sources=sources,
                listen=e.listen,
                targets=self._observers() if e.everyone else None,
            )
        if e.kind == DragInsider.kind:
            try:
                biases = hidden_biases(str(self.node.get("model")), str(self.node.get("data")))
            except DragError as exc:
                raise ChaosError(f"drag on {target.name}: {exc}") from None
            observers = self._observers()
            # the target first: the insider joins through it
            targets = lambda: sorted(observers(), key=lambda a: a != addr)  # noqa: E731
            return DragInsider(targets, e.rate, biases, secret=self.secret)
        assert e.victim is not None
        victim = self.peers[e.victim]
        if victim.peer_id is None:
            raise ChaosError(f"victim {victim.name} has no peer id yet")
        return ForgedRecords(
            addr,
            victim.peer_id,
            e.rate,
            signer=self.signer,
            observers=self._observers(but=victim.name),
        )

    def _observers(self, but: str | None = None) -> Callable[[], list[str]]:
        """The honest peers running at the time of each look (the victim lists not itself)."""
        return lambda: [
            p.addr
            for p in self.peers.values()
            if p.name in self.honest and p.name != but and p.state == "running" and p.addr
        ]

    async def _run(self, actor: Any, e: Event) -> None:
        start = self.clock.now()
        outcome = "done"
        try:
            await actor.run(e.duration)
        except asyncio.CancelledError:
            outcome = "stopped at the end of the run"
            raise
        finally:
            told = actor.report()
            # the attack's span (what the assertions measure) opens when the actor is ready: its
            # preparation (the sybils' keys and records) costs the runner's process, not the swarm
            start += float(told.get("ready_s", 0.0))
            report = {
                "kind": e.kind,
                "peer": e.peer,
                "id": e.id,
                "start": round(start, 3),
                "end": round(self.clock.now(), 3),
                "outcome": outcome,
                **told,
            }
            self.reports.append(report)
            got = report.get("accepted")
            self.say(
                f"chaos: t={report['end']:.1f}s {e.kind} on {e.peer} ended ({outcome}): "
                + (f"accepted {got}" if got is not None else f"{report.get('pushes')} pushes")
            )

    async def stop(self) -> None:
        """Cancel the actors still running and await every one; an actor's crash is raised."""
        for task in self._tasks:
            task.cancel()
        outcomes = await asyncio.gather(*self._tasks, return_exceptions=True)
        for outcome in outcomes:
            if isinstance(outcome, Exception):
                raise ChaosError(f"a hostile actor failed: {outcome!r}") from outcome
