"""Configs for peers run inside the test process (`Node.create`), several to a process."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable
from typing import Any

from swarmnode.node.peer.node import Node
from swarmnode.node.settings import PeerConfig

from tests.waiting import eventually

# A tiny model that trains until stopped and never evaluates on its own; paced, because several
# training threads share this process (and the box's two shared cores).
IN_PROCESS = {
    "model": "mlp:8",
    "steps": 0,
    "listen": "127.0.0.1:0",
    "eval_every": 10**6,
    "slowdown": 4.0,
}


def peer_config(**kw: Any) -> PeerConfig:
    """`IN_PROCESS` with `kw` on top."""
    return PeerConfig(**{**IN_PROCESS, **kw})


@contextlib.asynccontextmanager
async def evaluated_swarm(
    config: Callable[..., PeerConfig], names: tuple[str, ...] = ("a", "b", "c")
) -> AsyncIterator[list[Node]]:
    """In-process peers, each joining the one before, that see each other alive and have each
    evaluated once; closed in reverse order on the way out."""
    nodes: list[Node] = []
    try:
        for name in names:
            join = [nodes[-1].addr] if nodes else []
            nodes.append(await Node.create(config(join=join, name=name)))
        for n in nodes:
            others = {o.peer_id for o in nodes if o is not n}
            await eventually(
                lambda n=n, o=others: {m.peer_id for m in n.membership.live_peers()} == o,
                20,
                f"{n.name} to see the others alive",
            )
            await eventually(lambda n=n: n.worker.metrics().eval_step > 0, 30, "an evaluation")
        yield nodes
    finally:
        for n in reversed(nodes):
            await n.close()
