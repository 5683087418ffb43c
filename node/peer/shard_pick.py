"""`--shard auto`: a joining peer takes a shard that no live member of the swarm holds.

Every peer on a shard of a set (`--shard I/N`, N > 1) says so in its signed member meta
(`shard`), so a seed's `GET /v1/status` is the swarm's own view of who trains on what: its own
shard and those of the live members it knows. The joiner takes the lowest index of that N that
nobody alive holds. A peer resumed from a checkpoint keeps the shard its checkpoint was trained
on (resume refuses any other). Two joiners that ask at the same moment can pick the same shard:
start joiners one at a time, or check `swarmnode status`; a peer that finds its shard taken says
so once it is in the swarm (`shard_clash`).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import aiohttp
from swarmnode.gossip.auth import bearer, read_token
from swarmnode.node.peer.errors import JoinError
from swarmnode.node.train import ConfigError, list_checkpoints, load_latest
from swarmnode.node.train.data import parse_shard

log = logging.getLogger(__name__)

LIVE = ("self", "alive", "suspect")


def shard_text(shard: tuple[int, int]) -> str | None:
    """What a peer puts in its meta: `I/N`, or None on the whole set (nothing to share)."""
    return f"{shard[0]}/{shard[1]}" if shard[1] > 1 else None


def held_shards(status: Mapping[str, Any], self_id: str) -> list[tuple[str, tuple[int, int]]]:
    """(peer id, shard) of every live peer in a `/v1/status` answer but `self_id` (a restarted
    peer may still be listed alive under its id)."""
    rows = [{**status.get("self", {}), "state": "self"}, *status.get("members", [])]
    out = []
    for row in rows:
        text = row.get("shard")
        if row.get("peer_id") == self_id or row.get("state") not in LIVE or not text:
            continue
        try:
            out.append((str(row["peer_id"]), parse_shard(str(text))))
        except (ConfigError, KeyError):
            continue  # not ours to judge: another release's meta
    return out


def choose(held: Iterable[tuple[str, tuple[int, int]]], seed: str) -> tuple[int, int]:
    """The lowest free index of the swarm's shard count; ConfigError when there is none."""
    held = list(held)
    counts = sorted({count for _, (_, count) in held})
    if not counts:
        raise ConfigError(
            f"--shard auto: no live peer known to {seed} trains on a shard (they were started "
            "without --shard I/COUNT); give --shard INDEX/COUNT"
        )
    if len(counts) > 1:
        raise ConfigError(
            f"--shard auto: the swarm's peers use different shard counts ({counts}); give "
            "--shard INDEX/COUNT"
        )
    count = counts[0]
    taken = {index for _, (index, _) in held}
    for index in range(count):
        if index not in taken:
            return index, count
    raise ConfigError(
        f"--shard auto: all {count} shards are held by live peers; give --shard INDEX/{count} "
        "to share one"
    )


async def fetch_status(seed: str, timeout: float, token: str | None = None) -> dict[str, Any]:
    """The seed's status; `token`: a closed swarm's read token (an outsider's view is empty)."""
    url = f"http://{seed}/v1/status"
    client_timeout = aiohttp.ClientTimeout(total=timeout)
    async with aiohttp.ClientSession(timeout=client_timeout) as session:
        async with session.get(url, headers=bearer(token)) as resp:
            if resp.status != 200:
                raise JoinError(f"{seed} answered {resp.status} to GET /v1/status")
            data = await resp.json(content_type=None)
    if not isinstance(data, dict):
        raise JoinError(f"{seed}: its /v1/status is not a JSON object")
    return data


async def pick_shard(
    seeds: list[str],
    self_id: str,
    checkpoint_dir: Path | None,
    timeout: float,
    secret: str | None = None,
) -> tuple[int, int]:
    """The shard a `--shard auto` peer trains on (see the module doc); `secret`: the swarm's,
    whose read token lets a closed swarm's seed show its members' shards."""
    token = read_token(secret) if secret else None
    resumed = await asyncio.to_thread(_checkpoint_shard, checkpoint_dir)
    if resumed is not None:
        return resumed
    failures = []
    for seed in seeds:
        try:
            status = await fetch_status(seed, timeout, token)
        except (aiohttp.ClientError, asyncio.TimeoutError, OSError, ValueError, JoinError) as exc:
            failures.append(f"{seed}: {str(exc) or type(exc).__name__}")
            continue
        held = held_shards(status, self_id)
        shard = choose(held, seed)
        log.info("--shard auto: took shard %d/%d (held: %s)", *shard, _held_text(held))
        return shard
    raise JoinError(f"--shard auto: no seed answered GET /v1/status ({'; '.join(failures)})")


def _held_text(held: list[tuple[str, tuple[int, int]]]) -> str:
    return ", ".join(f"{i}/{n}" for _, (i, n) in sorted(held, key=lambda h: h[1])) or "none"


def _checkpoint_shard(checkpoint_dir: Path | None) -> tuple[int, int] | None:
    """The shard the newest checkpoint was trained on (a restarted `auto` peer keeps it)."""
    if checkpoint_dir is None or not list_checkpoints(checkpoint_dir):
        return None
    state = load_latest(checkpoint_dir)
    text = (state or {}).get("meta", {}).get("shard")
    if not text:
        return None
    shard = parse_shard(str(text))
    log.info("--shard auto: resuming the checkpoint's shard %d/%d", *shard)
    return shard


def shard_clash(shard: tuple[int, int], members: Iterable[Any]) -> list[str]:
    """Ids of the live members whose meta says they train on `shard` too."""
    mine = shard_text(shard)
    if mine is None:
        return []
    return [m.peer_id for m in members if m.meta.get("shard") == mine]
