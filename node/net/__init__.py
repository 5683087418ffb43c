"""The network room: the aiohttp app (the routes it is given, admission, body caps), the HTTP
transport, body reading. It knows no peer.

The public front: the names other rooms use.
"""

from swarmnode.node.net.app import build_app, serve
from swarmnode.node.net.body import read_body
from swarmnode.node.net.transport import HttpTransport

__all__ = ["HttpTransport", "build_app", "read_body", "serve"]
