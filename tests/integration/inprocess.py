"""Configs for peers run inside the test process (`Node.create`), several to a process."""

from __future__ import annotations

from typing import Any

from swarmnode.node.peer.config import PeerConfig

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
