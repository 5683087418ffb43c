"""How an error names a setting: written once below the fronts, shown by each front its own way.

The layers below the fronts (the config dataclasses, gossip/) know no flags: a message names a
setting in backquotes, by its keyword or by its config field (`` `max_lead` ``, or
`` `timeout` `` of `ExchangeConfig`, a field of gossip/ that knows no option). The front the
caller used turns each such name into the option's name as that caller wrote it: the CLI into
`--max-lead` (or `$SWARMNODE_MAX_LEAD`, or `max-lead` of the config file, where the value came
from there), the Python API into `max_lead=`. A name that is no option's just loses its quotes.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable

from swarmnode.node.settings.options import DEFAULT, Option, Resolved
from swarmnode.node.settings.start_options import START_OPTIONS

_NAME = re.compile(r"`([a-z][a-z0-9_]*)`")

Style = Callable[[Option], str]


def as_flag(opt: Option) -> str:
    return opt.flag


def as_keyword(opt: Option) -> str:
    return f"{opt.keyword}="


@functools.cache
def options_by_name() -> dict[str, Option]:
    """{name: option}: each visible option under its field's name (the last part of its path)
    and its keyword; the keyword wins where the two meet."""
    out: dict[str, Option] = {}
    for opt in START_OPTIONS:
        if not opt.hidden:
            out.setdefault(opt.path.rpartition(".")[2], opt)
    for opt in START_OPTIONS:
        if not opt.hidden:
            out[opt.keyword] = opt
    return out


def name_settings(text: str, style: Style) -> str:
    """Each backquoted setting in `text` as `style` names its option; other names unquoted."""
    by_name = options_by_name()

    def name(m: re.Match[str]) -> str:
        opt = by_name.get(m.group(1))
        return m.group(1) if opt is None else style(opt)

    return _NAME.sub(name, text)


def name_by_source(text: str, resolved: Resolved) -> str:
    """The CLI's naming: each setting as where its value came from: `--max-lead` (a flag, or
    not set at all), `$SWARMNODE_MAX_LEAD`, or the file's key `max-lead`, the file then named
    once at the end (`(set by peer.toml)`)."""
    files: list[str] = []

    def by_source(opt: Option) -> str:
        source = resolved.sources.get(opt.key, DEFAULT)
        if source == f"${opt.env}":
            return source
        if source == DEFAULT or source.startswith("--"):
            return opt.flag
        if source not in files:
            files.append(source)
        return opt.key

    named = name_settings(text, by_source)
    return f"{named} (set by {', '.join(files)})" if files else named
