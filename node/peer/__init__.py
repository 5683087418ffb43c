"""The swarm peer: `Node` and its identity, state sync, parameter store, status and admin
routes, byzantine serving. Its settings (`PeerConfig`) live in the settings room,
`swarmnode.node.settings`.

The public front: the names other rooms use, each loaded on first use. The CLI's log format
reads `log_name` on every verb, `swarmnode --help` included, and must not load the whole peer
(aiohttp, the trainer, the exchange: 0.3 s) to do it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

# Eager, and light: the function shadows its module of the same name only when bound here,
# before anything imports the module (which would set the package's attribute to the module).
from swarmnode.node.peer.log_name import log_name

from swarmnode.lazy import lazy_exports

if TYPE_CHECKING:
    from swarmnode.node.peer.aio import threadsafe_setter
    from swarmnode.node.peer.errors import JoinError
    from swarmnode.node.peer.node import Node
    from swarmnode.node.peer.state_sync import shared_start

_EXPORTS = {
    "JoinError": "swarmnode.node.peer.errors",
    "Node": "swarmnode.node.peer.node",
    "shared_start": "swarmnode.node.peer.state_sync",
    "threadsafe_setter": "swarmnode.node.peer.aio",
}

__all__ = ["JoinError", "Node", "log_name", "shared_start", "threadsafe_setter"]


__getattr__ = lazy_exports(__name__, _EXPORTS, globals())
