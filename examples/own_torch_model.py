"""A torch model of your own, trained by a swarm (docs/models.md: "torch").

    pip install 'swarmnode[torch]'
    swarmnode start --model own_torch_model:build          # with examples/ on PYTHONPATH
    python examples/own_torch_model.py                     # a 2-peer swarm in this process

`swarmnode.TorchModel` wraps the module and its loss: the module's parameters become views
into one flat buffer, which the swarm reads and updates through DLPack, without copies (on the
CPU or on CUDA). swarmnode's optimizer trains it (`--optimizer sgd|adamw`), not torch's.
"""

import torch
from torch import nn

import swarmnode


def build(seed=0, device="cpu"):
    """The factory `--model own_torch_model:build` calls, with --seed and the peer's device."""
    torch.manual_seed(seed)  # same seed on every peer: the same start
    net = nn.Sequential(nn.Flatten(), nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 10))
    return swarmnode.TorchModel(net, nn.functional.cross_entropy, device=device)


def main(steps=600):
    """Two peers in this process, each on its half of the bundled digits; prints each one's
    final test accuracy."""
    import asyncio

    async def swarm():
        # paced (2 ms a step) so that the first peer does not finish before the second joins
        settings = dict(data="digits", steps=steps, step_time=0.002, sync_every=10)
        async with swarmnode.Peer(build, shard=(0, 2), **settings) as a:
            async with swarmnode.Peer(build, shard=(1, 2), join=a, **settings) as b:
                return await asyncio.gather(a.wait(), b.wait())

    for name, metrics in zip("ab", asyncio.run(swarm()), strict=True):
        print(f"peer {name}: test accuracy {metrics.test_acc:.1%} after {metrics.step} steps")


if __name__ == "__main__":
    main()
