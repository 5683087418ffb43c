"""`swarmnode start`: run one peer.

Every `start` runs a swarm peer (`swarmnode.node.cli.run_peer`): alone it trains like a single
node, with `--join` it joins a swarm. Its options are written once, in `start_options`: flags,
`--config` file keys, `SWARMNODE_<OPTION>` variables and `--print-config` all come from there.
What the options build (data shard, model, optimizer, resume) is `swarmnode.node.train.build`.
"""

from __future__ import annotations

import argparse
import os
import sys
import threading
from collections.abc import Mapping
from typing import Any

from swarmnode.node.cli.logs import setup_logging
from swarmnode.node.settings import (
    COMMON,
    OTHER_VARS,
    PeerConfig,
    Resolved,
    build_config,
    name_by_source,
    start_options,
)
from swarmnode.node.train import TRAIN_THREAD, ConfigError

HELP = "train one peer on the bundled digits (or any data set) and report test accuracy"
CONFIG_ENV = "SWARMNODE_CONFIG"

# the 65 options would fill the usage line with 30 lines: the help below lists them by group
USAGE = "%(prog)s [--config FILE] [--model MODEL] [--data DATA] [--join HOST:PORT] [OPTION ...]"

DESCRIPTION = """\
Start one peer. The common options come first below; docs/options.md lists every option, with
its config file key, environment variable and Python keyword.

With no options it trains alone: an MLP on the bundled UCI digits, reaching >= 96% test
accuracy in seconds on one CPU core, with a progress line every --eval-every steps. With --join
HOST:PORT it joins a running swarm and exchanges parameters with it. With --checkpoint-dir the
run checkpoints every --checkpoint-every steps and resumes from the newest readable checkpoint
there. SIGINT/SIGTERM stop cleanly: the peer leaves the swarm, saves a final checkpoint and
exits 0.

Every option can also be a key of a TOML file (--config FILE: `batch-size = 64`), an
environment variable (SWARMNODE_BATCH_SIZE=64) or, from Python, a keyword
(swarmnode.Peer(model, batch_size=64)); flags win over the environment, which wins over the
file. --print-config shows the result and where each value came from.
"""


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "start",
        help=HELP,
        usage=USAGE,
        description=DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    common = p.add_argument_group(COMMON)
    common.add_argument(
        "--config",
        metavar="FILE",
        default=None,
        help=f"read options from a TOML file of `key = value` lines, keys as the options "
        f"below without -- (default: ${CONFIG_ENV})",
    )
    c = p.add_argument_group("configuration")
    c.add_argument(
        "--print-config",
        action="store_true",
        help="print the effective configuration (a valid --config file), each value with "
        "where it came from, check it, and exit",
    )
    start_options().add_to(p, common=common)
    p.set_defaults(func=run)


def resolve(args: argparse.Namespace, env: Mapping[str, str] | None = None) -> Resolved:
    """Every option's value: defaults < --config file < SWARMNODE_* < flags."""
    env = os.environ if env is None else env
    start_options().check_env(env, OTHER_VARS)
    file = getattr(args, "config", None) or env.get(CONFIG_ENV) or None
    return start_options().resolve(args, env, file)


def config_from(resolved: Resolved) -> PeerConfig:
    """The validated config; each setting its error names is named as where it was set (a
    flag, `$SWARMNODE_X`, the config file's key)."""
    cfg = build_config(resolved)
    try:
        return cfg.validate()
    except ConfigError as exc:
        raise ConfigError(name_by_source(str(exc), resolved)) from None


def run(args: argparse.Namespace) -> int:
    """Every `start` is a swarm peer: alone it trains like a single node, with --join it joins."""
    resolved = resolve(args)
    setup_logging(resolved.values["log-level"], resolved.values["log-json"])
    if args.print_config:
        print(start_options().describe(resolved), flush=True)
        config_from(resolved)  # a bad value: one line and exit 2, after the listing
        return 0
    from swarmnode.node.cli.run_peer import run_peer

    run_peer(config_from(resolved))
    _exit_now_if_a_step_was_abandoned()
    return 0


def _exit_now_if_a_step_was_abandoned() -> None:
    """A training step still running when close()'s budget ran out was abandoned (its thread is
    a daemon; the checkpoint before it stands). Interpreter finalisation tears modules down
    under such a thread, and a numpy/BLAS call in flight then segfaults (seen: signal 11 after
    SIGTERM on a loaded box). Everything is saved and flushed by now, so leave without it."""
    if any(t.name == TRAIN_THREAD and t.is_alive() for t in threading.enumerate()):
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(0)
