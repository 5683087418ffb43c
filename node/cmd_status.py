"""`swarmnode status --peer HOST:PORT`: ask any live peer for its view of the swarm."""

from __future__ import annotations

import argparse
import json
import sys
import urllib.error
import urllib.request
from typing import Any

from node.errors import ConfigError
from node.peer_config import parse_hostport
from node.status_table import format_status_table

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
    p.add_argument("--timeout", type=float, default=5.0, help="seconds to wait for the answer")
    p.add_argument("--json", action="store_true", help="print the raw status JSON instead")
    p.set_defaults(func=run)


def fetch_status(peer: str, timeout: float) -> dict[str, Any]:
    """GET http://peer/v1/status; raises ConfigError with a one-line reason on failure."""
    host, port = parse_hostport(peer, "--peer")
    url = f"http://{host}:{port}/v1/status"
    try:
        with urllib.request.urlopen(url, timeout=timeout) as resp:
            return json.loads(resp.read(16 * 2**20))
    except urllib.error.HTTPError as exc:
        raise ConfigError(f"{peer} answered {exc.code} {exc.reason}") from None
    except (urllib.error.URLError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        raise ConfigError(f"no answer from {peer}: {reason}") from None
    except ValueError as exc:
        raise ConfigError(f"{peer} sent a status that is not JSON: {exc}") from None


def run(args: argparse.Namespace) -> int:
    status = fetch_status(args.peer, args.timeout)
    if args.json:
        json.dump(status, sys.stdout, indent=2)
        print()
    else:
        print(format_status_table(status))
    return 0
