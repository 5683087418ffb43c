"""Hostile actors that speak the peers' real protocol from outside: a sybil flood (from one
address or many), slow bodies, forged records, and the drag (an insider's many small pushes
toward a dead model). Shared by the tests and the chaos runner (`action = "hostile"`). What each
attack meets: docs/security.md.

Each actor has a `kind`, `await run(seconds)` (cancel it to stop early; it closes what it
opened) and `report()`, whose `accepted` counts what the attack got through (the bar: 0)."""

from swarmnode.fault.hostile.drag import DragError, DragInsider, hidden_biases
from swarmnode.fault.hostile.forged import ForgedRecords
from swarmnode.fault.hostile.slow_bodies import SlowBodies
from swarmnode.fault.hostile.sybils import SybilFlood, source_addresses

HOSTILE_KINDS = (SybilFlood.kind, SlowBodies.kind, ForgedRecords.kind, DragInsider.kind)

__all__ = [
    "HOSTILE_KINDS",
    "DragError",
    "DragInsider",
    "ForgedRecords",
    "SlowBodies",
    "SybilFlood",
    "hidden_biases",
    "source_addresses",
]
