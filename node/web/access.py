"""Who may read what a peer shows: the page's stream, its snapshot, its figures, the status.

A peer of an open swarm shows everything to anyone: anyone may join it and read the same from
inside. A peer of a closed swarm (`--secret`) shows an outsider its liveness and version only
(`GET /v1/status` answers `{"self": {state, version, envelope, protocol}, "members": [],
"closed": true}`; the page's data routes and `/metrics` answer 401). A reader sees everything
when it is

- on this machine (the request came from a loopback address): the operator at the console,
  and the page opened there, as before;
- or a bearer of the swarm's read token (gossip/auth/read_token.py), derived from the secret:
  `Authorization: Bearer <token>` (`swarmnode status --secret`, the chaos runner, a member's
  page asking another member), or `?token=<token>` on the page's own requests (a browser's
  EventSource cannot set a header: the page takes the token from its address's `#token=`,
  which the browser never sends, and passes it on).

Trusted readers (the same two) also always find a seat at the page (node/web/watch.py). The
viewers' seats are counted by `seat_of` their address: IPv4 as is, IPv6 by its /64 (addresses
within one are one host's to choose).
"""

from __future__ import annotations

import hmac
import ipaddress
from dataclasses import dataclass, field

from aiohttp import web

TRUST_LOOPBACK = True  # a request from this machine reads everything (tests play outsiders)
CLOSED_TEXT = (
    "a closed swarm: its figures need its read token (`swarmnode status --secret S` sends "
    "it; on the page: #token=... after the address, `swarmnode status --secret S --token` "
    "prints it)"
)


def _ip(remote: str | None) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    try:
        ip = ipaddress.ip_address((remote or "").split("%")[0])
    except ValueError:
        return None
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        return ip.ipv4_mapped
    return ip


def is_loopback(remote: str | None) -> bool:
    ip = _ip(remote)
    return ip is not None and ip.is_loopback


def seat_of(remote: str | None) -> str:
    """The key a viewer's seats are counted under: its IPv4 address, or its IPv6 /64."""
    ip = _ip(remote)
    if ip is None:
        return remote or "?"
    if isinstance(ip, ipaddress.IPv6Address):
        return str(ipaddress.IPv6Network((ip, 64), strict=False))
    return str(ip)


@dataclass(frozen=True)
class Access:
    """The read rules of one peer. `token`: its swarm's read token (None: an open swarm);
    `loopback`: whether a request from this machine is trusted (tests turn it off to play an
    outsider on 127.0.0.1)."""

    token: str | None = None
    loopback: bool = field(default_factory=lambda: TRUST_LOOPBACK)

    @property
    def closed(self) -> bool:
        return self.token is not None

    def trusted(self, request: web.Request) -> bool:
        """From this machine, or with the read token."""
        if self.loopback and is_loopback(request.remote):
            return True
        return self.token is not None and hmac.compare_digest(
            presented(request).encode(), self.token.encode()
        )

    def may_read(self, request: web.Request) -> bool:
        """Everything in an open swarm; in a closed one, trusted readers only."""
        return not self.closed or self.trusted(request)


def presented(request: web.Request) -> str:
    """The token a request carries: its bearer header, else its `token` query parameter."""
    auth = request.headers.get("Authorization", "")
    if auth.startswith("Bearer "):
        return auth[len("Bearer ") :].strip()
    return request.query.get("token", "")


def refused() -> web.Response:
    return web.Response(status=401, text=CLOSED_TEXT, headers={"WWW-Authenticate": "Bearer"})
