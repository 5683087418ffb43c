"""swarmnode: a peer-to-peer, decentralized deep-learning training node.

The Python API (docs/models.md), imported on first use so that `import
swarmnode` stays cheap:

- `Model` — the protocol a model of your own implements: `params` (one flat float32 vector),
  `loss_and_grad(x, y) -> (loss, grad)`, `evaluate(x, y) -> (loss, accuracy)`.
- `Peer` — one swarm peer: `async with Peer(model, data, **settings) as peer`, `await
  peer.wait()`, or the blocking `Peer(...).run()`; `run(...)` is the latter in one call.
- `Swarm`, `AsyncSwarm` — the swarm for a training loop of your own: `swarm = Swarm(model,
  join=..., sync_every=10)`, `swarm.step()` after each optimizer step, `swarm.close()`.
- `PeerConfig`, `ExchangeConfig` — every setting, with its default (docs/options.md).
- `NpyRows` — the rows of a `.npy` file read on demand: inputs larger than memory.
- `TorchModel` — a torch `nn.Module` and loss as a `Model` (needs `pip install swarmnode[torch]`).
- `SwarmnodeError`, `UserCodeError` — what swarmnode raises; the latter for your code's errors.

The code lives in the repository's top-level folders (`kernels/`, `gossip/`, `node/`, `fault/`);
pyproject.toml maps each under this one import namespace (`swarmnode.kernels`, ...), so that
installing swarmnode adds no top-level name but `swarmnode` to site-packages.
"""

from __future__ import annotations

from typing import Any

from swarmnode.lazy import lazy_exports

__version__ = "0.1.0"

_EXPORTS = {
    "Model": "swarmnode.node.train.model.protocol",
    "Peer": "swarmnode.node.peer.api",
    "Swarm": "swarmnode.node.swarm.handle",
    "AsyncSwarm": "swarmnode.node.swarm.handle",
    "PeerConfig": "swarmnode.node.settings",
    "ExchangeConfig": "swarmnode.gossip.exchange",
    "NpyRows": "swarmnode.node.train.data.streamed",
    "TorchModel": "swarmnode.node.train.model.torch_model",
    "SwarmnodeError": "swarmnode.kernels.errors",
    "UserCodeError": "swarmnode.node.train.errors",
}

__all__ = ["__version__", "run", *_EXPORTS]


def run(model: Any = "mlp:512", data: Any = "digits", **settings: Any) -> Any:
    """Start one peer, train it to its `steps` budget, stop it; its final metrics
    (`Peer(model, data, **settings).run()`)."""
    return __getattr__("Peer")(model, data, **settings).run()


__getattr__ = lazy_exports(__name__, _EXPORTS, globals())


def __dir__() -> list[str]:
    return sorted(__all__)
