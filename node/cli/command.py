"""The `swarmnode` console script: one argparse subcommand per verb, one module per verb.

A verb module (`node.cmd_<verb>`) exposes `register(subparsers)`, which adds its parser and sets
`func=<callable(args) -> int>`. Adding a verb is adding its module name to `VERB_MODULES`.

Any deliberate error (`SwarmnodeError`) becomes one line on stderr and exit code 2, the same code
argparse uses for a bad command line, so a script or a test can tell "you asked for something
wrong" (2) from success (0) and from a crash (1, with a traceback).

BLAS threads: unless the user set one of `_BLAS_THREAD_VARS`, every swarmnode process runs numpy's
BLAS with one thread. Peers are small-batch workloads, several of them often share one machine
(`demo`, `chaos`, a laptop in a swarm), and each also does work on its event-loop thread; with
OpenBLAS's default of one thread per core, their spinning threads fight for the cores. Measured on
the loaded 2-core dev box: the default digits model trained at 40,800 samples/s with one BLAS
thread and 2,300 samples/s with two. Set `OMP_NUM_THREADS=N` to give a big CPU model more.
"""

from __future__ import annotations

import argparse
import importlib
import os
import re
import sys
from typing import NoReturn

from swarmnode.kernels.errors import (  # numpy-free: nothing above has loaded BLAS yet
    SwarmnodeError,
    did_you_mean,
)

_BLAS_THREAD_VARS = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")


def _default_to_one_blas_thread() -> None:
    """Must run before numpy is imported (BLAS reads these once, at load); see the docstring."""
    if not any(os.environ.get(v) for v in _BLAS_THREAD_VARS):
        for v in _BLAS_THREAD_VARS:
            os.environ[v] = "1"  # also inherited by the peers `demo` and `chaos` start


_default_to_one_blas_thread()

# After the BLAS default: these import numpy.
from swarmnode.node.cli.logs import setup_logging  # noqa: E402
from swarmnode.node.cli.version import version_text  # noqa: E402
from swarmnode.node.settings import as_flag, log_options, name_settings  # noqa: E402

VERB_MODULES = (
    "swarmnode.node.cli.cmd_start",
    "swarmnode.node.cli.cmd_status",
    "swarmnode.node.cli.cmd_demo",
    "swarmnode.node.cli.cmd_chaos",
    "swarmnode.node.cli.cmd_keygen",
)

EXIT_USAGE = 2
_INVALID_CHOICE = re.compile(r"invalid choice: '([^']*)' \(choose from (.*)\)")


class OneLineParser(argparse.ArgumentParser):
    """An argparse parser whose usage errors are one line, as every other error of the CLI
    (with the nearest flag to an unknown one), not the usage text and then the error."""

    def error(self, message: str) -> NoReturn:
        hint = _nearest_flag(message, self)
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message}{hint} (see {self.prog} --help)\n")


class DefaultsFormatter(argparse.ArgumentDefaultsHelpFormatter):
    """`--help` with each option's default, but no "(default: None)" or "(default: False)"
    after a flag that has none to show, nor a second default where the help names its own."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        text = action.help or ""
        if action.default in (None, False, argparse.SUPPRESS) or "default" in text:
            return text
        return super()._get_help_string(action)


def _nearest_flag(message: str, parser: argparse.ArgumentParser) -> str:
    choice = _INVALID_CHOICE.search(message)
    if choice:  # `swarmnode strat`: argparse lists the verbs but names none
        given, listed = choice.group(1), re.findall(r"'([^']*)'", choice.group(2))
        return did_you_mean(given, listed)
    unknown = [w for w in message.split() if w.startswith("--")]
    if "unrecognized" not in message or not unknown:
        return ""
    flag = unknown[0].split("=")[0]
    return did_you_mean(flag, field_flags_of(parser))


def field_flags_of(parser: argparse.ArgumentParser) -> set[str]:
    """Every long option of `parser` and its sub-parsers."""
    out: set[str] = set()
    for action in parser._actions:  # argparse exposes no public walk over its actions
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                out |= field_flags_of(sub)
        out.update(o for o in action.option_strings if o.startswith("--"))
    return out


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(
        prog="swarmnode",
        description="Peer-to-peer decentralized deep-learning training node.",
    )
    parser.add_argument(
        "--version",
        action="version",
        version=version_text(),
        help="print the release and the protocol and envelope versions it speaks (every peer "
        "of a swarm must speak the same) and exit",
    )
    log_options().add_to(parser)
    subparsers = parser.add_subparsers(dest="verb", metavar="VERB", required=True)
    for name in VERB_MODULES:
        importlib.import_module(name).register(subparsers)
    for sub in subparsers.choices.values():  # --log-level/--log-json after the verb too
        if "--log-level" not in sub._option_string_actions:
            log_options().add_to(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    setup_logging()
    try:
        logs = log_options().resolve(args)  # the flags and SWARMNODE_LOG_*; start adds its file
        setup_logging(logs.values["log-level"], logs.values["log-json"])
        return int(args.func(args) or 0)
    except SwarmnodeError as exc:
        text = name_settings(_one_line(exc), as_flag)  # a setting named below, as its flag
        print(f"swarmnode {args.verb}: error: {text}", file=sys.stderr, flush=True)
        return EXIT_USAGE
    except KeyboardInterrupt:  # a second Ctrl-C: abort without the clean-shutdown path
        print(f"swarmnode {args.verb}: interrupted", file=sys.stderr, flush=True)
        return 130


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split()) or type(exc).__name__
    return text


if __name__ == "__main__":
    sys.exit(main())
