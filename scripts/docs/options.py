#!/usr/bin/env python
"""Write docs/options.md, the reference of every option, from the option table itself.

    .venv/bin/python scripts/docs/options.py            # (re)writes docs/options.md
    .venv/bin/python scripts/docs/options.py --check    # exit 1 if docs/options.md differs

One row per setting of `swarmnode start` (node/settings/start_options.py: its key, flag, file
key, variable, Python keyword, default and help), grouped as the table groups them, then the
other verbs' options as their argparse parsers declare them. Nothing here is written by hand
but the page's short introduction: a new option, or a changed help or default, reaches the page
by running this script, and tests/test_options_doc.py fails until it has been run.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Iterable
from pathlib import Path

from swarmnode.node.cli.command import build_parser
from swarmnode.node.settings import LOG_OPTIONS, START_OPTIONS, Option, start_options

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "options.md"
COMMAND = ".venv/bin/python scripts/docs/options.py"
VERBS = ("status", "demo", "chaos", "keygen")
UNSET = "—"  # a setting with no default: unset unless given

INTRO = f"""\
# Options

Every setting of `swarmnode start` has one name, its **key**, and reads the same wherever it
is given:

| where | written | example |
|---|---|---|
| command line | `--KEY VALUE` | `--sync-every 10` |
| config file (`--config FILE`, TOML) | `KEY = VALUE` (`_` for `-` works too) | `sync-every = 10` |
| environment | `SWARMNODE_KEY=VALUE` (upper case, `_`) | `SWARMNODE_SYNC_EVERY=10` |
| Python | `KEY=VALUE` (`_` for `-`) | `swarmnode.Peer(model, sync_every=10)` |

Flags win over the environment, which wins over the file, which wins over the default;
`swarmnode start --print-config` prints the result, each value with where it came from, as a
file that `--config` reads back. A value is the text the flag takes everywhere; a file and
Python also take a number for a numeric option, `true`/`false` for a switch (a switch takes no
value on the command line), a list for `join`, and Python a pair for `shard` (`shard=(0, 4)`).
An error names the setting as you wrote it: `--max-lead`, `$SWARMNODE_MAX_LEAD`, `max-lead`
of the file, or `max_lead=`.

This page is generated from the option table (`node/settings/start_options.py`) by
`{COMMAND}`; edit the table, not this page.
"""


def cell(text: str) -> str:
    """`text` safe in a markdown table cell: `|` escaped everywhere, and outside code spans
    `<`, `>` (not read as HTML), `*` and a `_` that is not inside a word (not emphasis)."""
    parts = text.split("`")
    for i in range(0, len(parts), 2):  # the even parts are outside code spans
        part = parts[i].replace("<", "&lt;").replace(">", "&gt;").replace("*", r"\*")
        parts[i] = re.sub(r"(?<![A-Za-z0-9])_|_(?![A-Za-z0-9])", r"\_", part)
    return "`".join(parts).replace("|", r"\|")


def code(text: str) -> str:
    return f"`{text}`" if text else ""


def table(head: Iterable[str], rows: Iterable[Iterable[str]]) -> list[str]:
    head = list(head)
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    lines += ["| " + " | ".join(cell(c) for c in row) + " |" for row in rows]
    return lines


def flag_of(opt: Option) -> str:
    if opt.switch:
        return opt.flag
    choices = "|".join(opt.choices) if opt.choices else None
    return f"{opt.flag} {opt.metavar or choices or opt.key.replace('-', '_').upper()}"


def default_of(opt: Option) -> str:
    if opt.secret:
        return UNSET
    value = start_options().defaults(opt.path) if opt.path else None
    text = opt.text_of(value)
    return code(text) if text else UNSET


def option_row(opt: Option, python: bool = True) -> list[str]:
    keyword = f"{opt.keyword}=" if python else UNSET
    return [
        code(opt.key),
        code(flag_of(opt)),
        code(opt.key),
        code(opt.env),
        code(keyword) if python else keyword,
        default_of(opt),
        opt.help,
    ]


OPTION_HEAD = ("key", "flag", "file key", "variable", "Python keyword", "default", "what it does")


def groups(options: Iterable[Option]) -> dict[str, list[Option]]:
    out: dict[str, list[Option]] = {}
    for opt in options:
        if not opt.hidden:
            out.setdefault(opt.group, []).append(opt)
    return out


def anchor(title: str) -> str:
    """The anchor a code host gives a heading."""
    return re.sub(r"[^a-z0-9 -]", "", title.lower()).replace(" ", "-")


def verb_parsers() -> dict[str, argparse.ArgumentParser]:
    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    return dict(sub.choices)


def _log_dests() -> set[str]:
    return {o.dest for o in LOG_OPTIONS}


def argparse_rows(parser: argparse.ArgumentParser, skip: set[str]) -> list[list[str]]:
    """One row per argument of `parser` but --help and `skip`'s dests."""
    rows = []
    for action in parser._actions:  # argparse exposes no public walk over its actions
        hidden = action.help == argparse.SUPPRESS  # e.g. a test's hook, not for users
        if isinstance(action, argparse._HelpAction) or action.dest in skip or hidden:
            continue
        name = action.option_strings[-1] if action.option_strings else "(positional)"
        takes = action.nargs != 0
        value = action.metavar or (action.dest.upper() if takes else "")
        default = action.default
        unset = default is None or default is False or default == argparse.SUPPRESS
        shown = UNSET if unset else code(str(default))
        flag = f"{name} {value}" if takes and action.option_strings else name
        if not action.option_strings:
            flag = f"{value} (positional)"
        rows.append([code(flag), shown, action.help or ""])
    return rows


def start_own_rows() -> list[list[str]]:
    """`start`'s flags that are not settings (they say where the settings come from)."""
    table_dests = {o.dest for o in [*START_OPTIONS, *LOG_OPTIONS]}
    return argparse_rows(verb_parsers()["start"], table_dests)


def render() -> str:
    lines = [INTRO]
    by_group = groups(START_OPTIONS)
    common = [o for o in START_OPTIONS if o.common and not o.hidden]
    lines += [
        "The common options, listed first by `swarmnode start --help`: "
        + ", ".join(f"`{o.key}`" for o in common)
        + ".",
        "",
        "Sections: "
        + ", ".join(f"[{g}](#{anchor(g)})" for g in by_group)
        + f", [logging (every verb)](#{anchor('logging (every verb)')})"
        + f", [the other verbs](#{anchor('the other verbs')}).",
        "",
        "## swarmnode start",
        "",
        "Where the settings come from (these two are flags only; `--config` may also come from "
        "`$SWARMNODE_CONFIG`):",
        "",
        *table(("flag", "default", "what it does"), start_own_rows()),
        "",
    ]
    for group, options in by_group.items():
        lines += [f"### {group}", "", *table(OPTION_HEAD, map(option_row, options)), ""]
    lines += [
        "## logging (every verb)",
        "",
        "Before or after any verb (`swarmnode --log-level DEBUG status`, `swarmnode status "
        "--log-json`); `start` also reads them from its config file. They set the program's "
        "log, not the peer: no Python keyword (use Python's `logging`).",
        "",
        *table(OPTION_HEAD, (option_row(o, python=False) for o in LOG_OPTIONS)),
        "",
        "## the other verbs",
        "",
        "Their options are flags only (read from their argparse parsers).",
        "",
    ]
    parsers = verb_parsers()
    for verb in VERBS:
        parser = parsers[verb]
        lines += [f"### swarmnode {verb}", ""]
        if parser.description:
            lines += [" ".join(parser.description.split()), ""]
        rows = argparse_rows(parser, _log_dests())
        lines += [*table(("flag", "default", "what it does"), rows), ""]
    return "\n".join(lines).rstrip() + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--check", action="store_true", help="exit 1 if docs/options.md differs")
    args = ap.parse_args(argv)
    text = render()
    if args.check:
        current = PAGE.read_text() if PAGE.exists() else ""
        if current != text:
            print(f"{PAGE.relative_to(ROOT)} is out of date: run `{COMMAND}`", file=sys.stderr)
            return 1
        return 0
    PAGE.write_text(text)
    print(f"wrote {PAGE.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
