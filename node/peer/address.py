"""The address a peer advertises: the one the other members dial it at.

`--advertise` wins. A specific `--listen` host is its own answer. A wildcard listen (`0.0.0.0`,
`::`) serves on every interface, so the peer must find which of its addresses the swarm reaches:

- joining, the source address the kernel picks for the route to the seed (a connected UDP
  socket: nothing is sent): the address the seed sees this peer's requests come from, the way
  libp2p's identify reports an observed address, without asking the seed;
- founding a swarm, the source address of the default route; without one, the host's only
  non-loopback address; a host with several and no default route cannot tell, and says so.

Behind NAT none of these is what the others dial (the port is the NAT's too): `--advertise`.
A peer never advertises a loopback address to a swarm that is not on loopback: nobody there could
dial it (`check_reachable`).
"""

from __future__ import annotations

import ipaddress
import socket
import sys
from typing import NamedTuple

from swarmnode.node.train import ConfigError

WILDCARDS = ("0.0.0.0", "", "::")
# Only routed, never contacted (a UDP connect sends nothing): the default route's source.
_PROBE = {socket.AF_INET: "203.0.113.1", socket.AF_INET6: "2001:db8::1"}


class Advertised(NamedTuple):
    addr: str  # HOST:PORT ([HOST]:PORT for IPv6)
    how: str  # why this address, for the start banner


def host_port(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def is_loopback(host: str) -> bool:
    """127.0.0.0/8, ::1 and `localhost`; a name that is not an IP literal is taken as routable."""
    host = host.strip("[]")
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def advertised(listen_host: str, port: int, advertise: str | None, seeds: list[str]) -> Advertised:
    """The address to advertise (blocking: a seed's name may need DNS). ConfigError (one line,
    exit 2) where a wildcard listen leaves no usable answer."""
    if advertise:
        return Advertised(advertise, "--advertise")
    if listen_host not in WILDCARDS:
        return Advertised(host_port(listen_host, port), "--listen")
    family = socket.AF_INET6 if listen_host == "::" else socket.AF_INET
    listen = f"--listen {host_port(listen_host or '0.0.0.0', port)}"
    if seeds:
        for seed in seeds:
            host, _, seed_port = seed.rpartition(":")
            source = route_source(host.strip("[]"), int(seed_port), family)
            if source is not None:
                return Advertised(host_port(source, port), f"the route to {seed}")
        raise ConfigError(
            f"{listen}: no route to any seed ({', '.join(seeds)}) to learn this host's address "
            "from; give --advertise HOST:PORT"
        )
    source = route_source(_PROBE[family], 9, family)
    if source is not None:
        return Advertised(host_port(source, port), "the default route")
    return _only_address(family, port, listen)


def _only_address(family: int, port: int, listen: str) -> Advertised:
    found = interface_addresses() if family == socket.AF_INET else None
    if found is None:
        raise ConfigError(
            f"{listen}: no default route, and the interfaces' addresses cannot be listed here; "
            "give --advertise HOST:PORT"
        )
    routable = [a for a in found if not is_loopback(a)]
    if len(routable) == 1:
        return Advertised(host_port(routable[0], port), "the host's only network address")
    if not routable:
        return Advertised(host_port("127.0.0.1", port), "no network: loopback only")
    raise ConfigError(
        f"{listen}: this host has several addresses ({', '.join(routable)}) and no default "
        "route; give --advertise HOST:PORT with the one the other peers reach"
    )


def route_source(host: str, port: int, family: int = socket.AF_INET) -> str | None:
    """The local address the kernel would send from to `host` (None: no route, no such name)."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_DGRAM)
    except OSError:
        return None
    infos.sort(key=lambda info: info[0] != family)  # the listen's family first
    for fam, kind, proto, _, sockaddr in infos:
        try:
            with socket.socket(fam, kind, proto) as s:
                s.connect(sockaddr)
                return str(s.getsockname()[0])
        except OSError:
            continue
    return None


def interface_addresses() -> list[str] | None:
    """The primary IPv4 address of every interface (Linux's SIOCGIFADDR); None elsewhere."""
    if not sys.platform.startswith("linux"):
        return None
    import fcntl  # Linux only
    import struct

    siocgifaddr = 0x8915
    out = []
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        for _, name in socket.if_nameindex():
            try:
                req = struct.pack("256s", name.encode()[:15])
                res = fcntl.ioctl(s.fileno(), siocgifaddr, req)
            except OSError:
                continue  # no IPv4 address on this interface
            out.append(socket.inet_ntoa(res[20:24]))
    return out


def check_reachable(addr: str, others: list[str], what: str) -> None:
    """ConfigError unless `addr` can be dialled by peers at `others`: a loopback address is
    only for a swarm that is all on loopback."""
    host = addr.rpartition(":")[0]
    if not is_loopback(host):
        return
    remote = [o for o in others if not is_loopback(o.rpartition(":")[0])]
    if remote:
        raise ConfigError(
            f"this peer would advertise {addr}, a loopback address, to {what} at {remote[0]}, "
            "which cannot dial it: listen on its address (or 0.0.0.0), or give --advertise "
            "HOST:PORT"
        )
