"""swarmnode: a peer-to-peer, decentralized deep-learning training node.

The code lives in the repository's top-level folders (`kernels/`, `gossip/`, `node/`, `fault/`);
pyproject.toml maps each under this one import namespace (`swarmnode.kernels`, ...), so that
installing swarmnode adds no top-level name but `swarmnode` to site-packages.
"""

__version__ = "0.1.0"
