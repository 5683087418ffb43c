"""The control run (issue 22): the same swarm, on the same box and at the same time, with the
attacker's seat held by an honest slow peer instead.

A hostile scenario asks whether an attack costs the honest peers more than a slow peer would.
On a shared, loaded box no fixed bar says that (an honest swarm's accuracy and round rate at 20 s
move with the box's load), so the runner starts a second swarm beside the first, the control,
and the `control_*` assertions compare the two (swarmnode.fault.chaos.assertions.control). The
control is the scenario with:

- `[control] peer`'s seat held by an honest peer with the `[control]` flags (a slowdown): the
  byzantine peer of that name made honest, or, for an outside attacker, a peer added on the shard
  the attacked run leaves empty (the scenario splits the data into one more shard than it has
  peers: the attacker took a seat);
- no hostile events, and no `byzantine` event on that peer; every other event as in the scenario;
- no assertions of its own, and its own report under `<report>/control/`.
"""

from __future__ import annotations

import dataclasses

from swarmnode.fault.chaos.scenario import PeerSpec, Scenario


def control_scenario(sc: Scenario) -> Scenario:
    """The control swarm of `sc` (which must have a `[control]` table)."""
    spec = sc.control
    if spec is None:
        raise ValueError(f"scenario {sc.name} has no [control]")
    peers = []
    for p in sc.peers:
        if p.name == spec.peer:
            flags = {k: v for k, v in p.flags.items() if k != "byzantine"} | spec.flags
            p = dataclasses.replace(p, flags=flags)
        peers.append(p)
    if spec.peer not in {p.name for p in sc.peers}:
        peers.append(PeerSpec(name=spec.peer, index=len(sc.peers), flags=dict(spec.flags)))
    events = tuple(
        e
        for e in sc.events
        if e.action != "hostile" and not (e.action == "byzantine" and e.peer == spec.peer)
    )
    flags = " ".join(f"{k}={v}" for k, v in spec.flags.items())
    return dataclasses.replace(
        sc,
        name=f"{sc.name}-control",
        description=f"control of {sc.name}: {spec.peer} honest ({flags}), no attack",
        peers=tuple(peers),
        events=events,
        assertions=(),
        control=None,
        seats=sc.shards,
    )
