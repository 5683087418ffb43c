"""What a peer says about itself outside its status page: the member meta it gossips (its
`--name` and training progress, signed into its member record), the ready file, and its
knocks on the seeds when it finds itself alone."""

from __future__ import annotations

import asyncio
import json
import logging
import os
from pathlib import Path
from typing import TYPE_CHECKING

from swarmnode.kernels.errors import SwarmnodeError
from swarmnode.node.peer.aio import finite_or_none

if TYPE_CHECKING:
    from swarmnode.node.peer.node import Node

log = logging.getLogger(__name__)

REJOIN_EVERY_S = 5.0
META_EVERY_S = 0.25  # how often training progress is copied into the gossiped member meta


def update_meta(node: Node) -> None:
    """Copy the training progress into our member meta (signed when it next travels; a change
    of progress alone is re-signed at most every `records.PROGRESS_RESEAL_S`)."""
    m = node.worker.metrics()
    node.membership.set_meta(
        step=int(m.step),
        loss=finite_or_none(m.loss),
        acc=finite_or_none(m.test_acc),
        device=m.device,
    )


async def meta_loop(node: Node) -> None:
    while True:
        update_meta(node)
        await asyncio.sleep(META_EVERY_S)


def write_ready_file(node: Node) -> None:
    """`--ready-file`: `{"peer_id", "name", "addr", "pid"}`, written whole (a rename). The id
    derives from the peer's key: whoever started it learns it here."""
    if not node.cfg.ready_file:
        return
    path = Path(node.cfg.ready_file)
    tmp = path.with_name(path.name + ".tmp")
    info = {"peer_id": node.peer_id, "name": node.name, "addr": node.addr, "pid": os.getpid()}
    tmp.write_text(json.dumps(info))
    os.replace(tmp, path)


async def rejoin_loop(node: Node) -> None:
    """Alone for too long (a partition outlived the tombstones): knock on the seeds again."""
    while True:
        await asyncio.sleep(REJOIN_EVERY_S)
        if node.state != "alive" or node.membership.live_peers():
            continue  # a failed peer has left on purpose
        try:
            await node.membership.join(node.cfg.join, timeout=REJOIN_EVERY_S)
            log.info("re-joined the swarm through the seeds")
        except SwarmnodeError as exc:
            log.info("re-join attempt failed: %s", exc)
