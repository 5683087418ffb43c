"""The swarm peer: `Node` and its config, identity, state sync, parameter store, status and
admin routes, byzantine serving.

The public front: the names other rooms use.
"""

from swarmnode.node.peer.config import PeerConfig, parse_hostport
from swarmnode.node.peer.errors import JoinError
from swarmnode.node.peer.node import Node

__all__ = ["JoinError", "Node", "PeerConfig", "parse_hostport"]
