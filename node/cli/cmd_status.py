"""`swarmnode status --peer HOST:PORT`: ask any live peer for its view of the swarm.

`--watch` redraws the swarm in place once per `--interval` from the peer's `GET /v1/watch/now`:
each member's own figures, fetched fresh by that peer (node/web/watch.py), each with its age,
and the swarm figures and newest events of its web page.

A closed swarm's peer (`--secret`) shows an outsider only that it is up (node/web/access.py):
with `--secret` (or `$SWARMNODE_SECRET`) the requests carry the swarm's read token, derived from
the secret, and `--token` prints that token (for a Prometheus scraper's bearer, or the page's
`#token=`) without asking any peer.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import socket
import sys
import time
import urllib.error
import urllib.request
from typing import Any

from swarmnode.gossip.auth import VERSION as ENVELOPE_VERSION
from swarmnode.gossip.auth import bearer, read_token
from swarmnode.gossip.wire import PROTOCOL_VERSION
from swarmnode.node.cli.command import DefaultsFormatter
from swarmnode.node.cli.status_table import format_status_table
from swarmnode.node.cli.watch_view import format_watch
from swarmnode.node.settings import parse_hostport
from swarmnode.node.train import ConfigError

from swarmnode import __version__

HELP = "print a table of the swarm as one peer sees it"
SECRET_VAR = "SWARMNODE_SECRET"  # what `swarmnode start` reads when --secret is not given


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "status",
        help=HELP,
        description="Fetch GET /v1/status from a peer and print every member it knows: id, "
        "address, device, state (self, alive, suspect, dead, left), step, loss, test accuracy, "
        "and how long ago it was heard from.",
        formatter_class=DefaultsFormatter,
    )
    p.add_argument("--peer", default="127.0.0.1:7070", metavar="HOST:PORT", help="any live peer")
    p.add_argument(
        "--timeout", type=_positive_seconds, default=5.0, help="seconds to wait for the answer"
    )
    p.add_argument("--json", action="store_true", help="print the raw status JSON instead")
    p.add_argument(
        "--secret",
        default=None,
        help="the swarm secret of a closed swarm (default: $SWARMNODE_SECRET): sends its read "
        "token, without which a closed swarm's peer shows only that it is up",
    )
    p.add_argument(
        "--token",
        action="store_true",
        help="print the swarm's read token (from --secret) and exit: a bearer for /metrics, "
        "/v1/status and the page (http://HOST:PORT/#token=...)",
    )
    p.add_argument(
        "--watch",
        action="store_true",
        help="redraw in place until Ctrl-C: every member's fresh figures with their age, the "
        "swarm figures and the newest events (what the peer's web page at / shows)",
    )
    p.add_argument(
        "--interval", type=_positive_seconds, default=1.0, help="--watch: seconds between redraws"
    )
    p.add_argument(
        "--count", type=int, default=0, metavar="N", help="--watch: stop after N redraws (0: never)"
    )
    p.set_defaults(func=run)


def fetch_status(peer: str, timeout: float, token: str | None = None) -> dict[str, Any]:
    """GET http://peer/v1/status; raises ConfigError with a one-line reason on failure."""
    status = fetch_json(peer, "/v1/status", timeout, token)
    if isinstance(status, dict) and status.get("closed") is True:
        me = status.get("self") if isinstance(status.get("self"), dict) else {}
        raise ConfigError(
            f"{peer} is up ({me.get('state', '?')}, swarmnode {me.get('version', '?')}) in a "
            "closed swarm: its figures need the swarm secret here too (--secret or "
            f"{SECRET_VAR})" + (": the one given is not that swarm's" if token else "")
        )
    if not _looks_like_status(status):
        if (skew := version_skew(peer, status)) is not None:
            raise ConfigError(f"{skew}: its status is not one this release reads")
        raise ConfigError(
            f"{peer} answered JSON that is not a peer status (expected a map with 'self' and "
            "'members'): is it a swarmnode peer?"
        )
    return status


def fetch_watch(peer: str, timeout: float, token: str | None = None) -> dict[str, Any]:
    """GET http://peer/v1/watch/now (the page's snapshot); ConfigError on failure."""
    snap = fetch_json(peer, "/v1/watch/now", timeout, token)
    if not (isinstance(snap, dict) and isinstance(snap.get("members"), list)):
        raise ConfigError(f"{peer} answered JSON that is not a swarm snapshot: too old a peer?")
    return snap


def fetch_json(peer: str, path: str, timeout: float, token: str | None = None) -> Any:
    host, port = parse_hostport(peer, "--peer")
    request = urllib.request.Request(f"http://{host}:{port}{path}", headers=bearer(token))
    try:
        with urllib.request.urlopen(request, timeout=timeout) as resp:
            status = json.loads(resp.read(16 * 2**20))
    except urllib.error.HTTPError as exc:
        if exc.code == 401:
            raise ConfigError(
                f"{peer} is in a closed swarm: its figures need the swarm secret here too "
                f"(--secret or {SECRET_VAR})"
                + (": the one given is not that swarm's" if token else "")
            ) from None
        raise ConfigError(f"{peer} answered {exc.code} {exc.reason}") from None
    except (urllib.error.URLError, OSError) as exc:
        raise ConfigError(f"no answer from {peer}: {short_reason(exc)}") from None
    except ValueError as exc:
        raise ConfigError(f"{peer} sent a status that is not JSON: {exc}") from None
    return status


def version_skew(peer: str, status: Any) -> str | None:
    """One line naming both releases where the peer runs another one (its envelope or protocol
    version is not ours; a release too old to say either, by its version), else None."""
    me = status.get("self") if isinstance(status, dict) else None
    if not isinstance(me, dict):
        return None
    envelope, protocol, version = me.get("envelope"), me.get("protocol"), me.get("version")
    if "envelope" in me or "protocol" in me:
        same = envelope == ENVELOPE_VERSION and protocol in (None, PROTOCOL_VERSION)
    else:
        same = version in (None, __version__)
    if same:
        return None
    return (
        f"{peer} runs another swarmnode release: swarmnode {version} (protocol {protocol}, "
        f"envelope {envelope}); this is swarmnode {__version__} (protocol {PROTOCOL_VERSION}, "
        f"envelope {ENVELOPE_VERSION})"
    )


def _table_across(peer: str, status: dict[str, Any]) -> str:
    """The table; where the peer runs another release, a line saying so first (stderr), and
    that line as the error if its figures do not read as this release's."""
    skew = version_skew(peer, status)
    if skew is None:
        return format_status_table(status)
    print(skew, file=sys.stderr)
    try:
        return format_status_table(status)
    except (KeyError, TypeError, ValueError, AttributeError):
        raise ConfigError(f"{skew}: its status is not one this release reads") from None


def short_reason(exc: BaseException) -> str:
    """Why a peer did not answer, in a word ("refused", "timed out", "unreachable"): the
    `--watch` screen shows it on top, and a library's text would wrap it."""
    reason = getattr(exc, "reason", exc)
    if isinstance(reason, ConnectionRefusedError):
        return "refused"
    if isinstance(reason, (TimeoutError, socket.timeout)):
        return "timed out"
    return "unreachable"


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


def token_of(args: argparse.Namespace) -> str | None:
    """The read token of `--secret` (or `$SWARMNODE_SECRET`); None without either."""
    secret = args.secret if args.secret is not None else os.environ.get(SECRET_VAR)
    if secret is None:
        return None
    if not secret:
        raise ConfigError(
            f"the swarm secret ({'--secret' if args.secret is not None else SECRET_VAR}) is empty"
        )
    return read_token(secret)


def run(args: argparse.Namespace) -> int:
    args.read_token = token_of(args)
    if args.token:
        if args.read_token is None:
            raise ConfigError(f"--token needs the swarm secret: --secret or {SECRET_VAR}")
        print(args.read_token)
        return 0
    if args.watch:
        return watch(args)
    status = fetch_status(args.peer, args.timeout, args.read_token)
    if args.json:
        json.dump(status, sys.stdout, indent=2)
        print()
    else:
        print(_table_across(args.peer, status))
    return 0


CLEAR = "\x1b[H\x1b[J"  # cursor home, erase below: the screen is redrawn in place


def watch(args: argparse.Namespace) -> int:
    """Redraw until Ctrl-C (exit 0) or `--count` redraws. The first fetch must succeed; a later
    failure keeps the last screen, says why on top, and tries again (a peer may restart)."""
    if args.count < 0:
        raise ConfigError(f"--count must be >= 0, got {args.count}")
    snap = fetch_watch(args.peer, args.timeout, getattr(args, "read_token", None))
    in_place = sys.stdout.isatty()
    drawn = 0
    try:
        while True:
            note = ""
            if drawn:
                try:
                    snap = fetch_watch(args.peer, args.timeout, getattr(args, "read_token", None))
                except ConfigError as exc:
                    note = f"(not refreshed: {exc}; showing the last answer)"
            screen = format_watch(snap, note=note)
            sys.stdout.write(CLEAR + screen + "\n" if in_place else screen + "\n\n")
            sys.stdout.flush()
            drawn += 1
            if args.count and drawn >= args.count:
                return 0
            time.sleep(args.interval)
    except KeyboardInterrupt:
        return 0
