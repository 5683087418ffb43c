"""What a peer says about itself outside its status page: the member meta it gossips (its
`--name` and training progress, signed into its member record), the ready file, and its
knocks on the seeds when it finds itself alone."""

from __future__ import annotations

import asyncio
import json
import logging
import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from swarmnode.gossip.membership import Membership
from swarmnode.kernels.errors import SwarmnodeError
from swarmnode.node.peer.aio import finite_or_none
from swarmnode.node.train import TrainingWorker
from swarmnode.node.train.lr import SCHEDULES

log = logging.getLogger(__name__)

REJOIN_EVERY_S = 5.0
META_EVERY_S = 0.25  # how often training progress is copied into the gossiped member meta


def update_meta(worker: TrainingWorker, membership: Membership) -> None:
    """Copy the training progress into our member meta (signed when it next travels; a change
    of progress alone is re-signed at most every `records.PROGRESS_RESEAL_S`)."""
    m = worker.metrics()
    membership.set_meta(
        step=int(m.step),
        loss=finite_or_none(m.loss),
        acc=finite_or_none(m.test_acc),
        device=m.device,
    )


def lr_mismatch(mine: Any, theirs: Sequence[object]) -> str | None:
    """A warning where the live members' lr schedules (`LRSchedule.print` in their records)
    agree with one another and not with `mine` (an `LRSchedule`); None where they match, say
    nothing (an older release) or disagree among themselves (no one schedule to follow).
    Their records are an insider's writing: only a short string of the known form is read."""
    said = {t for t in theirs if isinstance(t, str) and len(t) <= 40}
    if len(said) != 1 or mine.print in said:
        return None
    (swarm,) = said
    kind, _, horizon = swarm.partition(":")
    ours = f"this peer's is {mine.print}: its lr will not follow the swarm's"
    if swarm == "constant":
        return f"the swarm keeps its lr constant, {ours}; give --lr-schedule constant to follow it"
    if kind not in SCHEDULES or not horizon.isdigit():
        return None
    return (
        f"the swarm decays its lr ({kind} to step {horizon}), {ours}; give --lr-decay-steps "
        f"{horizon} (or --steps {horizon}) to follow it"
    )


async def meta_loop(worker: TrainingWorker, membership: Membership) -> None:
    while True:
        update_meta(worker, membership)
        await asyncio.sleep(META_EVERY_S)


def write_ready_file(path: str, info: dict[str, Any]) -> None:
    """`--ready-file`: `{"peer_id", "name", "addr", "pid"}` (the pid added here), written whole
    (a rename). The id derives from the peer's key: whoever started it learns it here."""
    target = Path(path)
    tmp = target.with_name(target.name + ".tmp")
    tmp.write_text(json.dumps({**info, "pid": os.getpid()}))
    os.replace(tmp, target)


async def rejoin_loop(
    membership: Membership, seeds: Sequence[str], alive: Callable[[], bool]
) -> None:
    """Alone for too long (a partition outlived the tombstones): knock on the seeds again.
    `alive()`: whether this peer still wants to be in the swarm (a failed one left on purpose)."""
    while True:
        await asyncio.sleep(REJOIN_EVERY_S)
        if not alive() or membership.live_peers():
            continue
        try:
            await membership.join(seeds, timeout=REJOIN_EVERY_S)
            log.info("re-joined the swarm through the seeds")
        except SwarmnodeError as exc:
            log.info("re-join attempt failed: %s", exc)
