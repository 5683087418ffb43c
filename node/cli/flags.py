"""From config field names to command-line flags, for error messages.

The layers below the CLI (gossip/, the config dataclasses) name a setting by its field, in
backquotes (`` `sync_every` ``): they know no flags. The CLI, the only room that does, turns each
such name into the flag that sets it (`--sync-every`) before it prints the error. The map comes
from the options themselves (node/cli/start_options.py): a field of `ExchangeConfig` is named by
its own name (`timeout`), and its option knows its flag (`--exchange-timeout`).
"""

from __future__ import annotations

import functools
import re

_FIELD = re.compile(r"`([a-z][a-z0-9_]*)`")


@functools.cache
def field_flags() -> dict[str, str]:
    """{field name (the last part of its path): the flag that sets it}."""
    from swarmnode.node.cli.start_options import START_OPTIONS  # late: it imports the configs

    return {o.path.rpartition(".")[2]: o.flag for o in START_OPTIONS if not o.hidden}


def name_flags(text: str, flags: dict[str, str]) -> str:
    """Each backquoted field name in `text` as its flag; an unknown name just loses its quotes."""

    def flag(m: re.Match[str]) -> str:
        name = m.group(1)
        return flags.get(name, name)

    return _FIELD.sub(flag, text)
