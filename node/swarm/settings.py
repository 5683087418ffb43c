"""A `Swarm`'s settings: the same keys as `Peer`'s, one name per setting (`sync_every=10`).

`_config_from(**settings) -> PeerConfig` maps them: a `PeerConfig` field by its name, an
`ExchangeConfig` field (`sync_every`, `outer_lr`, `outer_momentum`, `compress`, ...) by its
own name too, so that a user never needs to know which dataclass holds it. It stands in for
the settings room's `from_keywords` until that lands (then it points there). `own_loop(cfg,
kind, size)` then fills in what the user's loop replaces. The settings that only the built-in
loop reads (its model, data, optimizer, pacing) are refused with the reason: a `Swarm` that
silently ignored `lr=` would train with another lr than its user thinks.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from swarmnode.gossip.exchange import ExchangeConfig
from swarmnode.node.peer.config import PeerConfig
from swarmnode.node.train.errors import ConfigError

API_LISTEN = "127.0.0.1:0"  # as `Peer`: a library takes no fixed port unasked
OWN_LOOP = "own-loop"
_PEER = {f.name for f in dataclasses.fields(PeerConfig)}
_EXCHANGE = {f.name for f in dataclasses.fields(ExchangeConfig)}
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
    "lr_warmup": "your lr schedule is yours",
    "summary_json": "there is no run summary of a loop that is yours",
}


def _config_from(**settings: Any) -> PeerConfig:
    """The `PeerConfig` of `Peer`-style keyword settings (ConfigError on an unknown key)."""
    exchange = settings.pop("exchange", None)
    if isinstance(exchange, ExchangeConfig):
        exchange = dataclasses.asdict(exchange)
    exchange = dict(exchange or {})
    for key in [k for k in settings if k in _EXCHANGE and k not in _PEER]:
        exchange[key] = settings.pop(key)
    unknown = sorted(set(settings) - _PEER)
    if unknown:
        raise ConfigError(
            f"unknown setting(s) {', '.join(unknown)} (see PeerConfig and ExchangeConfig)"
        )
    try:
        settings["exchange"] = ExchangeConfig(**exchange)
    except TypeError as exc:  # an unknown field of a dict given as `exchange=`
        raise ConfigError(f"exchange settings: {exc} (see ExchangeConfig)") from None
    settings.setdefault("listen", API_LISTEN)
    return PeerConfig(**settings)


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
