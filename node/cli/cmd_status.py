"""`swarmnode status --peer HOST:PORT`: ask any live peer for its view of the swarm."""

from __future__ import annotations

import argparse
import json
import math
import sys
import urllib.error
import urllib.request
from typing import Any

from swarmnode.node.cli.status_table import format_status_table
from swarmnode.node.peer.config import parse_hostport
from swarmnode.node.train.errors import ConfigError

HELP = "print a table of the swarm as one peer sees it"


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "status",
        help=HELP,
        description="Fetch GET /v1/status from a peer and print every member it knows: id, "
        "address, device, state (self, alive, suspect, dead, left), step, loss, test accuracy, "
        "and how long ago it was heard from.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    p.add_argument("--peer", default="127.0.0.1:7070", metavar="HOST:PORT", help="any live peer")
    p.add_argument(
        "--timeout", type=_positive_seconds, default=5.0, help="seconds to wait for the answer"
    )
    p.add_argument("--json", action="store_true", help="print the raw status JSON instead")
    p.set_defaults(func=run)


def fetch_status(peer: str, timeout: float) -> dict[str, Any]:
    """GET http://peer/v1/status; raises ConfigError with a one-line reason on failure."""
    host, port = parse_hostport(peer, "--peer")
    url = f"http://{host}:{port}/v1/status"
    try:
        with urllib.request.urlopen(url, timeout=timeout) as resp:
            status = json.loads(resp.read(16 * 2**20))
    except urllib.error.HTTPError as exc:
        raise ConfigError(f"{peer} answered {exc.code} {exc.reason}") from None
    except (urllib.error.URLError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        raise ConfigError(f"no answer from {peer}: {reason}") from None
    except ValueError as exc:
        raise ConfigError(f"{peer} sent a status that is not JSON: {exc}") from None
    if not _looks_like_status(status):
        raise ConfigError(
            f"{peer} answered JSON that is not a peer status (expected a map with 'self' and "
            "'members'): is it a swarmnode peer?"
        )
    return status


def _looks_like_status(status: Any) -> bool:
    """The shape the table needs (docs/architecture.md); field values are shown as they are."""
    return (
        isinstance(status, dict)
        and isinstance(status.get("self"), dict)
        and isinstance(status.get("members"), list)
        and all(isinstance(m, dict) for m in status["members"])
    )


def _positive_seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not 0 < value < math.inf:
        raise argparse.ArgumentTypeError(f"expected a positive number of seconds, got {text!r}")
    return value


def run(args: argparse.Namespace) -> int:
    status = fetch_status(args.peer, args.timeout)
    if args.json:
        json.dump(status, sys.stdout, indent=2)
        print()
    else:
        print(format_status_table(status))
    return 0
