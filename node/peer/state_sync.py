"""Join-time state sync: a newcomer starts from the swarm's current model, not a fresh one.

It pulls the parameters (and step counter) of `DONORS` random live peers (all of them where
fewer) in parallel — random, so that many newcomers spread their downloads over the swarm
instead of all hitting the seed — and waits until that many answered (a donor that had not yet
heard of the joiner is told by a gossip and asked again), so that a hostile minority cannot pick
the median. It validates each (shape, dtype, finiteness: `swarmnode.gossip.wire.frames`), drops
a donor far from the others (a distance bound), and loads their coordinate-wise median at the
donors' lower median step, bounded by what the members' own records report.
"""

from __future__ import annotations

import asyncio
import logging
import random
import re
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np
from swarmnode.gossip.membership import PROGRESS_RESEAL_S, dialable, label_of
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


DONORS = 3  # wanted: 3 when the swarm has >= 3 live members, else all of them
# Honest peers' models differ by their recent local steps: far less than this fraction of their
# norm. A larger spread means one donor is not like the others; the median still protects us.
SPREAD_WARN = 0.5
# A donor this many times farther from the donors' median than the median donor is, and
# farther than FAR_FLOOR of the model's norm, is not a model the others would hand out: dropped.
FAR_FACTOR = 4.0
FAR_FLOOR = 0.01
# A step claimed by the donors is believed up to what the members' own records report, plus
# what a member may have trained since its record was sealed: progress is re-sealed only every
# PROGRESS_RESEAL_S, and no member steps faster than this (a tiny model on a GPU: ~1,000/s).
MAX_STEPS_PER_S = 1000
RETRY_S = 0.25  # first pause before asking other donors, doubling up to RETRY_MAX_S
RETRY_MAX_S = 2.0
MIN_PULL_S = 1.0  # a last try near the join deadline still gets this long
JOINING = "joining: state sync not finished"  # why a joiner refuses to serve its model
# what gossip.wire.frames says of a model of another size: no retry will change that
_OTHER_MODEL = re.compile(r"payload holds (\d+) parameters, this model has (\d+)")
CLOCK_OFF = "off this peer's clock"  # a refused envelope's timestamp (gossip/auth/replay.py)
# a donor that has not heard of us yet (403): it will within a gossip round; said at DEBUG
_NOT_YET = ("not a live member", "403")


async def sync_from_swarm(node: Joiner, timeout: float) -> None:
    """Load the swarm's current parameters into `node` before it starts training."""
    if not node.membership.live_peers():
        log.info("joined, but no live peer to copy the model from: starting from my own")
        return
    got, failures = await _fetch_donors(node, timeout)
    if not got:
        return
    for pid, why in failures.items():
        level = logging.DEBUG if all(w in why for w in _NOT_YET) else logging.INFO
        log.log(level, "state sync: donor %s failed: %s", _who(node, pid), why)
    got = await asyncio.to_thread(_without_outliers, node, got)
    vectors = [vec for _, _, vec in got]
    spread = await asyncio.to_thread(relative_spread, vectors)
    if spread > SPREAD_WARN:
        log.warning(
            "state sync: donors disagree (relative spread %.2f); taking their median", spread
        )
    swarm_step = _believed_step(node, [step for _, step, _ in got])
    if node.resumed is not None and node.trainer.step_count >= swarm_step:
        log.info(
            "state sync: my checkpoint (step %d) is newer than the swarm's",
            node.trainer.step_count,
        )
        return
    model = await asyncio.to_thread(_median, vectors)
    await node.store.load(model)
    await _seed_push_bound(node, vectors, model)
    node.trainer.step_count = swarm_step
    node.synced_step = swarm_step  # the summary tells inherited steps from trained ones
    log.info(
        "state sync: loaded the %s of %s at step %d",
        "median model" if len(got) > 1 else "model",
        ", ".join(_who(node, pid) for pid, _, _ in got),
        swarm_step,
    )


async def _seed_push_bound(node: Joiner, vectors: list[np.ndarray], model: np.ndarray) -> None:
    """The donors' distances to the model loaded, as the push bound's first distances: how
    far honest members are from it. A fresh bound has none and takes 4 x |own| until its
    first round (right for a young swarm of unlike starts), which admits a member serving -x
    (2 |own| away) into a joiner that holds the swarm's model already."""
    guard = getattr(node.exchanger, "guard", None)
    if guard is None or len(vectors) < 2:
        return
    dists = await asyncio.to_thread(lambda: [_distance(v, model) for v in vectors])
    if any(d > 0 for d in dists):  # identical donors say nothing of how far honest ones are
        guard.record(dists)


def _distance(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.linalg.norm(a.astype(np.float64) - b.astype(np.float64)))


def _who(node: Joiner, peer_id: str) -> str:
    """`name (id prefix)` for a member that has a name, else its id (`label_of`)."""
    member = node.membership.get(peer_id) if hasattr(node.membership, "get") else None
    return label_of(member, peer_id)


def _without_outliers(node: Joiner, got: list[Any]) -> list[Any]:
    """The donors whose models are near the others': with three or more, one far from their
    coordinate-wise median (FAR_FACTOR x the median donor's distance, and FAR_FLOOR of the
    norm) is dropped and said, so that a liar does not even pull the median its way. Only a
    minority is ever dropped; two donors cannot be told apart (each is the other's outlier)."""
    if len(got) < 3:
        return got
    vectors = [vec.astype(np.float64) for _, _, vec in got]
    centre = np.median(np.stack(vectors), axis=0)
    dist = [float(np.linalg.norm(v - centre)) for v in vectors]
    typical = float(np.median(dist))
    bound = max(FAR_FACTOR * typical, FAR_FLOOR * float(np.linalg.norm(centre)))
    far = [i for i, d in enumerate(dist) if d > bound]
    if not far or len(far) * 2 >= len(got):
        return got
    for i in far:
        log.warning(
            "state sync: donor %s serves a model far from the others' (distance %.3g to "
            "their median, the others %.3g): not used",
            _who(node, got[i][0]),
            dist[i],
            typical,
        )
    return [g for i, g in enumerate(got) if i not in far]


def _believed_step(node: Joiner, steps: list[int]) -> int:
    """The donors' lower median step (one liar among two or three cannot raise it), bounded
    by what the live members' own records report: one donor claiming step 2^60 must not end
    every `--steps N` joiner that draws it."""
    step = sorted(steps)[(len(steps) - 1) // 2]
    reported = [
        s
        for m in node.membership.live_peers()
        if isinstance(s := (getattr(m, "meta", None) or {}).get("step"), int) and s >= 0
    ]
    if not reported:
        return step
    ceiling = max(reported)
    if step <= 2 * ceiling + MAX_STEPS_PER_S * PROGRESS_RESEAL_S:
        return step
    log.warning(
        "state sync: donors claim step %d, the members' records at most %d: taking %d",
        step,
        ceiling,
        ceiling,
    )
    return ceiling


async def _fetch_donors(node: Joiner, timeout: float) -> tuple[list[Any], dict[str, str]]:
    """Models of DONORS random live peers (all of them when fewer), so that a hostile
    minority cannot pick the median; asks again (the others, and those that refused: busy,
    joining themselves, not yet told of us), backing off, until enough answered or `timeout`.
    Each donor is told of us first (a gossip), so that it knows us when we ask."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    pause = RETRY_S
    got: dict[str, Any] = {}
    failures: dict[str, str] = {}
    joining: set[str] = set()  # members that answered they are joining too: no donors
    while True:
        need, picked = await _next_donors(node, got, joining)
        failed: dict[str, str] = {}
        # The whole join deadline, not one exchange's: several donors' full models share a
        # joiner's downlink (three 21 MB models take ~25 s at 20 Mbit/s), and a join may wait
        # where a training round may not.
        wait = max(deadline - loop.time(), MIN_PULL_S)
        for pid, step, vec in await node.exchanger.pull_many(picked, failed, timeout=wait):
            got[pid] = (pid, step, vec)
            failures.pop(pid, None)
        failures.update(failed)
        # Peers that started together each joined through the others: one waiting for another
        # that waits for it held both until the join deadline (28 s of a chaos run's 34 s
        # start). A joiner has no swarm model to give: the wanted count is of the others.
        joining |= {pid for pid, why in failed.items() if JOINING in why}
        if not got and _nobody_has_a_model(picked, failed):
            return [], failures
        if len(got) >= _wanted(node, got, joining):
            return list(got.values()), failures
        if loop.time() + pause > deadline or not picked:
            return _out_of_time(node, got, failures, need, picked, timeout), failures
        quiet = all(all(w in why for w in _NOT_YET) for why in failed.values())
        log.log(
            logging.DEBUG if quiet else logging.INFO,
            "state sync: %d of %d donors so far (%s); asking again",
            len(got),
            need,
            "; ".join(failed.values()),
        )
        await asyncio.sleep(pause)
        pause = min(2 * pause, RETRY_MAX_S)


def _wanted(node: Joiner, got: dict[str, Any], joining: set[str]) -> int:
    """How many donors are wanted in all: DONORS, or every live member that could be one (an
    outbound-only member cannot serve; a joining one has nothing to serve yet)."""
    live = {m.peer_id for m in dialable(node.membership.live_peers())} - joining
    return min(DONORS, len(live | got.keys()))


async def _next_donors(
    node: Joiner, got: dict[str, Any], joining: set[str]
) -> tuple[int, list[tuple[str, str]]]:
    """(how many donors are wanted in all, the (id, address) of those to ask now), the latter
    told of us first; not those that said they are joining."""
    live = dialable(node.membership.live_peers())  # an outbound-only one cannot serve
    need = _wanted(node, got, joining)
    ask = [m for m in live if m.peer_id not in got and m.peer_id not in joining]
    picked = node.rng.sample([(m.peer_id, m.addr) for m in ask], min(need - len(got), len(ask)))
    introduce = getattr(node.membership, "introduce", None)
    if introduce is not None:
        await introduce([m for m in ask if (m.peer_id, m.addr) in picked])
    return need, picked


def _nobody_has_a_model(picked: list[tuple[str, str]], failed: dict[str, str]) -> bool:
    """No donor answered: raise where no retry can help (another model, a clock off); True
    where every donor asked is joining too (peers that started at once, each through the
    others: nobody has a swarm model yet, so ours is as good as any, the exchange averages)."""
    _refuse_another_model(failed)
    _refuse_a_clock_off(failed)
    if picked and all(JOINING in why for why in failed.values()):
        log.info("state sync: every donor is joining too: starting from my own model")
        return True
    return False


def _out_of_time(
    node: Joiner,
    got: dict[str, Any],
    failures: dict[str, str],
    need: int,
    picked: list[tuple[str, str]],
    timeout: float,
) -> list[Any]:
    """The join deadline is near (or nobody is left to ask): the donors that answered, fewer
    than wanted (their median is still the best start there is); none: a JoinError."""
    if got:
        log.warning(
            "state sync: only %d of %d donors answered within %g s: taking their median",
            len(got),
            need,
            timeout,
        )
        return list(got.values())
    detail = "; ".join(f"{_who(node, pid)}: {why}" for pid, why in failures.items())
    raise JoinError(
        f"could not fetch the model from any of {len(picked)} peers within "
        f"{timeout:g} s ({detail or 'no live peer left'}); behind a slow link, "
        "raise --join-timeout"
    )


def _refuse_a_clock_off(failures: dict[str, str]) -> None:
    """Every donor asked refuses our requests' timestamps: our clock is off theirs, which no
    retry changes (a hint to raise --join-timeout would send the operator the wrong way)."""
    if not failures or not all(CLOCK_OFF in why for why in failures.values()):
        return
    said = next(iter(failures.values())).split(" answered ", 1)[-1]
    raise JoinError(f"the donors refuse this peer's clock ({said})")


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
