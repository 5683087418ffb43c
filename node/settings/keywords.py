"""The option table read as Python keywords: `swarmnode.Peer(model, sync_every=10)`.

A keyword is an option's key with `_` (`sync_every`, `exchange_timeout`, `trust`, `mix_rule`),
and its value is the text the flag takes (`push_budget="off"`, `shard="2/4"`) or the natural
Python value (a number, a bool for a switch, a list for `join`, a tuple for `shard`, an object
for `model` and `data`), parsed by the option itself, so that a keyword and its flag can never
mean different things. A value of another kind, or an unknown keyword (with the nearest one),
is a `ConfigError` naming the keyword.

The older spellings still work, undocumented, so that no program written against them breaks:
any `PeerConfig` field by its own name (`trust_file=`, `sign_exchange=`), its value taken as
is, and `exchange=` as an `ExchangeConfig` or a dict of its fields (a text `exchange=` is the
mode, the option `exchange`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from swarmnode.gossip.exchange import ExchangeConfig
from swarmnode.kernels.errors import did_you_mean
from swarmnode.node.settings.config import PeerConfig
from swarmnode.node.settings.naming import Style, as_keyword, name_settings
from swarmnode.node.settings.options import Option, parsed
from swarmnode.node.settings.start_options import START_OPTIONS, field_default
from swarmnode.node.train import ConfigError

_FIELDS = frozenset(f.name for f in dataclasses.fields(PeerConfig))
_EXCHANGE_FIELDS = frozenset(f.name for f in dataclasses.fields(ExchangeConfig))


def keywords() -> dict[str, Option]:
    """{keyword: option} for every documented option of the table."""
    return {o.keyword: o for o in START_OPTIONS if not o.hidden}


def from_keywords(**kw: Any) -> PeerConfig:
    """The `PeerConfig` these keywords give (not yet validated: see `validated`)."""
    table = keywords()
    values: dict[str, Any] = {}  # field path -> value
    named: dict[str, str] = {}  # field path -> the keyword that set it
    exchange: Any = None
    for name, value in kw.items():
        if name == "exchange" and not isinstance(value, str):
            exchange = value  # the older spelling: an ExchangeConfig or a dict of its fields
            continue
        opt = table.get(name)
        if opt is not None:
            path, value = opt.path, _value(opt, value, name)
        elif name in _FIELDS:
            path = name  # the older spelling: a field by its own name, its value as is
        else:
            raise ConfigError(f"unknown peer setting '{name}'{_nearest(name, table)}")
        if path in named:
            raise ConfigError(f"{named[path]}= and {name}= set the same setting: give one")
        values[path], named[path] = value, name
    return _build(values, named, exchange)


def validated(cfg: PeerConfig, style: Style = as_keyword) -> PeerConfig:
    """`cfg.validate()`, its error naming each setting as `style` does (a keyword, `max_lead=`,
    unless told otherwise)."""
    try:
        return cfg.validate()
    except ConfigError as exc:
        raise ConfigError(name_settings(str(exc), style)) from None


def _value(opt: Option, value: Any, name: str) -> Any:
    if value is None and field_default(opt.path) is None:
        return None  # unset, as the default: `checkpoint_dir=None`
    return parsed(opt.from_python, value, f"{name}=")


def _build(values: dict[str, Any], named: dict[str, str], exchange: Any) -> PeerConfig:
    base = _exchange_base(exchange)
    ours = {p.partition(".")[2]: v for p, v in values.items() if p.startswith("exchange.")}
    if isinstance(exchange, Mapping):
        for field in sorted(set(ours) & set(exchange)):
            name = named[f"exchange.{field}"]
            raise ConfigError(f"{name}= and exchange={{'{field}': ...}} set the same setting")
    top = {p: v for p, v in values.items() if "." not in p}
    return PeerConfig(**top, exchange=dataclasses.replace(base, **ours))


def _exchange_base(exchange: Any) -> ExchangeConfig:
    if exchange is None:
        return ExchangeConfig()
    if isinstance(exchange, ExchangeConfig):
        return exchange
    if isinstance(exchange, Mapping):
        unknown = sorted(set(exchange) - _EXCHANGE_FIELDS)
        if unknown:  # say which, as for the keywords
            raise ConfigError(
                f"exchange settings: unknown field(s) {', '.join(map(repr, unknown))}"
            )
        return ExchangeConfig(**exchange)
    raise ConfigError(
        f"exchange=: expected average or robust (the mode), got a {type(exchange).__name__}"
    )


def _nearest(name: str, table: Mapping[str, Option]) -> str:
    return did_you_mean(name, table) or " (see docs/options.md)"
