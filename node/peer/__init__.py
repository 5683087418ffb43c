"""The swarm peer: `Node` and its identity, state sync, parameter store, status and admin
routes, byzantine serving. Its settings (`PeerConfig`) live in the settings room,
`swarmnode.node.settings`.

The public front: the names other rooms use.
"""

from swarmnode.node.peer.errors import JoinError
from swarmnode.node.peer.node import Node

__all__ = ["JoinError", "Node"]
