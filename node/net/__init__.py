"""The network room: the aiohttp app (the routes it is given, admission, body caps), the HTTP
transport, body reading. It knows no peer.

The public front: the names other rooms use.
"""

from swarmnode.node.net.app import build_app, local_addr, serve
from swarmnode.node.net.body import read_body
from swarmnode.node.net.intake import IntakeLimits, read_on_time
from swarmnode.node.net.transport import HttpTransport

__all__ = [
    "HttpTransport",
    "IntakeLimits",
    "build_app",
    "local_addr",
    "read_body",
    "read_on_time",
    "serve",
]
