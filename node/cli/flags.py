"""From config field names to command-line flags, for error messages.

The layers below the CLI (gossip/, the config dataclasses) name a setting by its field, in
backquotes (`` `sync_every` ``): they know no flags. The CLI, the only room that does, turns each
such name into the flag that sets it (`--sync-every`) before it prints the error.
"""

from __future__ import annotations

import argparse
import re

# Fields whose flag is not the field name with dashes: the flag carries its group's name.
FIELD_ALIASES = {"timeout": "exchange_timeout", "mode": "exchange"}

_FIELD = re.compile(r"`([a-z][a-z0-9_]*)`")


def field_flags(parser: argparse.ArgumentParser) -> dict[str, str]:
    """{dest: its first long option} over the parser and all its sub-parsers."""
    flags: dict[str, str] = {}
    for action in parser._actions:  # argparse exposes no public walk over its actions
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                flags.update(field_flags(sub))
        elif action.option_strings:
            flags.setdefault(action.dest, action.option_strings[-1])
    return flags


def name_flags(text: str, flags: dict[str, str]) -> str:
    """Each backquoted field name in `text` as its flag; an unknown name just loses its quotes."""

    def flag(m: re.Match[str]) -> str:
        name = m.group(1)
        return flags.get(FIELD_ALIASES.get(name, name), name)

    return _FIELD.sub(flag, text)
