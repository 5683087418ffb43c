"""`swarmnode keygen --out DIR`: an operator key pair for the admin routes.

Writes DIR/operator.key (the Ed25519 private key, mode 0600: whoever holds it may sabotage any
peer started with its public half) and DIR/operator.pub (give this to `start --admin-key`).
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from swarmnode.gossip.auth import OperatorKey
from swarmnode.node.cli.command import DefaultsFormatter
from swarmnode.node.train import ConfigError

HELP = "make an operator key pair for --enable-admin --admin-key"


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "keygen",
        help=HELP,
        description="Write OUT/operator.key (Ed25519 private key, mode 0600; signs admin "
        "requests) and OUT/operator.pub (its public half, for `start --admin-key`).",
        formatter_class=DefaultsFormatter,
    )
    p.add_argument("--out", default=".", metavar="DIR", help="directory for the two files")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    out = Path(args.out)
    private, public = out / "operator.key", out / "operator.pub"
    if private.exists():
        raise ConfigError(f"{private} exists; not overwriting an operator key")
    out.mkdir(parents=True, exist_ok=True)
    OperatorKey.generate().save(private, public)
    print(f"wrote {private} (keep it private) and {public} (for --admin-key)")
    return 0
