"""Join-time state sync: a newcomer starts from the swarm's current model, not a fresh one.

It pulls the parameters (and step counter) of up to `DONORS` random live peers in parallel —
random, so that many newcomers spread their downloads over the swarm instead of all hitting the
seed — validates each (shape, dtype, finiteness: `swarmnode.gossip.wire.frames`), cross-checks them against each
other where there are several, and loads their coordinate-wise median: with three donors one
lying peer cannot choose the newcomer's starting point.
"""

from __future__ import annotations

import asyncio
import logging
import random
import re
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np
from swarmnode.gossip.membership import dialable
from swarmnode.kernels import lowrank
from swarmnode.kernels.backend import to_numpy
from swarmnode.node.peer.errors import JoinError

if TYPE_CHECKING:
    from swarmnode.gossip.exchange import Exchanger
    from swarmnode.gossip.membership import Membership
    from swarmnode.node.peer.param_store import WorkerStore
    from swarmnode.node.train import Trainer

log = logging.getLogger(__name__)


class Joiner(Protocol):
    """What the state sync uses of the joining peer (the `Node` implements it)."""

    membership: Membership
    exchanger: Exchanger
    store: WorkerStore
    trainer: Trainer
    rng: random.Random
    resumed: dict[str, Any] | None  # the checkpoint this run resumed from, if any


DONORS = 3
# Honest peers' models differ by their recent local steps: far less than this fraction of their
# norm. A larger spread means one donor is not like the others; the median still protects us.
SPREAD_WARN = 0.5
RETRY_S = 0.25  # first pause before asking other donors, doubling up to RETRY_MAX_S
RETRY_MAX_S = 2.0
MIN_PULL_S = 1.0  # a last try near the join deadline still gets this long
JOINING = "joining: state sync not finished"  # why a joiner refuses to serve its model
# what gossip.wire.frames says of a model of another size: no retry will change that
_OTHER_MODEL = re.compile(r"payload holds (\d+) parameters, this model has (\d+)")


async def sync_from_swarm(node: Joiner, timeout: float) -> None:
    """Load the swarm's current parameters into `node` before it starts training."""
    if not node.membership.live_peers():
        log.info("joined, but no live peer to copy the model from: starting from my own")
        return
    got, failures = await _fetch_donors(node, timeout)
    if not got:
        return
    for pid, why in failures.items():
        log.info("state sync: donor %s failed: %s", pid, why)
    steps = [step for _, step, _ in got]
    vectors = [vec for _, _, vec in got]
    spread = await asyncio.to_thread(relative_spread, vectors)
    if spread > SPREAD_WARN:
        log.warning(
            "state sync: donors disagree (relative spread %.2f); taking their median", spread
        )
    swarm_step = int(np.median(steps))
    if node.resumed is not None and node.trainer.step_count >= swarm_step:
        log.info(
            "state sync: my checkpoint (step %d) is newer than the swarm's",
            node.trainer.step_count,
        )
        return
    model = await asyncio.to_thread(_median, vectors)
    await node.store.load(model)
    node.trainer.step_count = swarm_step
    node.synced_step = swarm_step  # the summary tells inherited steps from trained ones
    log.info(
        "state sync: loaded the model of %s at step %d",
        ", ".join(pid for pid, _, _ in got),
        swarm_step,
    )


async def _fetch_donors(node: Joiner, timeout: float) -> tuple[list[Any], dict[str, str]]:
    """Models of up to DONORS random live peers; tries again (other donors, backing off) while
    none answered — donors may be busy (503) or joining themselves — until `timeout`."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    pause = RETRY_S
    while True:
        live = dialable(node.membership.live_peers())  # an outbound-only one cannot serve
        picked = node.rng.sample([(m.peer_id, m.addr) for m in live], min(DONORS, len(live)))
        failures: dict[str, str] = {}
        # The whole join deadline, not one exchange's: several donors' full models share a
        # joiner's downlink (three 21 MB models take ~25 s at 20 Mbit/s), and a join may wait
        # where a training round may not.
        wait = max(deadline - loop.time(), MIN_PULL_S)
        got = await node.exchanger.pull_many(picked, failures, timeout=wait)
        if got:
            return got, failures
        _refuse_another_model(failures)
        if picked and all(JOINING in why for why in failures.values()):
            # peers that started at once, each joining through the others: nobody has a
            # swarm model yet, so ours is as good as any (the exchange will average them)
            log.info("state sync: every donor is joining too: starting from my own model")
            return [], failures
        if loop.time() + pause > deadline or not picked:
            detail = "; ".join(f"{pid}: {why}" for pid, why in failures.items())
            raise JoinError(
                f"could not fetch the model from any of {len(picked)} peers within "
                f"{timeout:g} s ({detail or 'no live peer left'}); behind a slow link, "
                "raise --join-timeout"
            )
        log.info("state sync: no donor answered (%s); trying again", "; ".join(failures.values()))
        await asyncio.sleep(pause)
        pause = min(2 * pause, RETRY_MAX_S)


def _refuse_another_model(failures: dict[str, str]) -> None:
    """Every donor asked serves a model of another size: the swarm trains another model, and
    waiting out --join-timeout would not change it (one lying donor among several cannot end
    the join: all must say so)."""
    sizes = [_OTHER_MODEL.search(why) for why in failures.values()]
    if not sizes or not all(sizes):
        return
    theirs = sorted({int(m.group(1)) for m in sizes if m})
    mine = sizes[0].group(2) if sizes[0] else "?"
    raise JoinError(
        f"the swarm trains another model: its peers serve {' or '.join(map(str, theirs))} "
        f"parameters, this peer's --model has {mine}; start it with the swarm's --model "
        "(and --data)"
    )


def shared_start(trainer: Trainer, compress: str) -> np.ndarray | None:
    """The initial parameters, which every peer of this seed and model shares, kept on the host
    for the compressed exchange's pairs and state sync (gossip.exchange.refs); None without compression
    (nothing would read them)."""
    if compress == "none":
        return None
    return to_numpy(trainer.model.params.data).copy()


def param_segments(trainer: Trainer) -> tuple[tuple[int, int], ...]:
    """The model's parameter tensors as (rows, cols) matrices in buffer order: what the
    lowrank codec factors (`kernels.lowrank.segments`)."""
    return lowrank.segments([tuple(v.shape) for v in trainer.model.params.views.values()])


def relative_spread(vectors: list[np.ndarray]) -> float:
    """Largest pairwise distance over the median norm (0 for a single vector)."""
    if len(vectors) < 2:
        return 0.0
    norm = float(np.median([np.linalg.norm(v.astype(np.float64)) for v in vectors])) or 1.0
    worst = max(
        float(np.linalg.norm(a.astype(np.float64) - b.astype(np.float64)))
        for i, a in enumerate(vectors)
        for b in vectors[i + 1 :]
    )
    return worst / norm


def _median(vectors: list[np.ndarray]) -> np.ndarray:
    if len(vectors) == 1:
        return vectors[0]
    return np.median(np.stack(vectors), axis=0).astype(np.float32)
