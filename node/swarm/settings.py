"""A `Swarm`'s settings: the same keys as `Peer`'s, one name per setting (`sync_every=10`).

`config_from(**settings) -> PeerConfig` reads them through the settings room's
`from_keywords`, so a `Swarm` and a `Peer` can never spell a setting differently. `own_loop(cfg,
kind, size)` then fills in what the user's loop replaces. The settings that only the built-in
loop reads (its model, data, optimizer, schedule, pacing) are refused with the reason: a `Swarm`
that silently ignored `lr=` would train with another lr than its user thinks.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from swarmnode.node.settings import PeerConfig, from_keywords
from swarmnode.node.train import ConfigError

API_LISTEN = "127.0.0.1:0"  # as `Peer`: a library takes no fixed port unasked
OWN_LOOP = "own-loop"
_SCHEDULE = "your lr schedule is yours"
# read by swarmnode's own training loop only: in the user's loop their code owns each
_LOOP_ONLY = {
    "model": "the model is Swarm's first argument",
    "data": "your loop reads its own data",
    "steps": "your loop decides how many steps it takes",
    "lr": "your optimizer's learning rate is yours",
    "optimizer": "the optimizer is yours",
    "momentum": "your optimizer's momentum is yours",
    "weight_decay": "your optimizer's weight decay is yours",
    "logit_adjust": "your loss is yours",
    "device": "the swarm uses the device your model is on",
    "shard": "your loop reads its own data",
    "partition": "your loop reads its own data",
    "slowdown": "your loop sets its own pace",
    "step_time": "your loop sets its own pace",
    "lr_scale": "scale your own lr with the swarm size if you want to",
    "lr_scale_max": "scale your own lr with the swarm size if you want to",
    "lr_warmup": _SCHEDULE,
    "lr_schedule": _SCHEDULE,
    "lr_floor": _SCHEDULE,
    "lr_decay_steps": _SCHEDULE,
    "eval_every": "your loop evaluates when it wants to",
    "summary_json": "there is no run summary of a loop that is yours",
}


def config_from(**settings: Any) -> PeerConfig:
    """The `PeerConfig` of `Peer`-style keyword settings (not yet validated; ConfigError on an
    unknown key or a value of the wrong kind, naming the keyword)."""
    settings.setdefault("listen", API_LISTEN)
    return from_keywords(**settings)


def check_own_loop(settings: dict[str, Any]) -> None:
    """Refuse the settings that only swarmnode's own training loop reads."""
    for key in sorted(settings):
        if key in _LOOP_ONLY:
            raise ConfigError(
                f"Swarm(..., {key}=...): {_LOOP_ONLY[key]}; `{key}` is a setting of swarmnode's "
                "own training loop (swarmnode.Peer, swarmnode start)"
            )


def own_loop(cfg: PeerConfig, kind: str, size: int) -> PeerConfig:
    """`cfg` for a peer whose loop is the user's: no step budget; the model named by what it
    is (a checkpoint of `checkpoint_dir` written for another model is refused on resume)."""
    return dataclasses.replace(
        cfg, model=f"{OWN_LOOP}:{kind}:{size}", data=OWN_LOOP, steps=0, device="auto"
    )
