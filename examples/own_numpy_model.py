"""A model of your own, in plain numpy, trained by a swarm (docs/models.md: "Your model in our loop").

    swarmnode start --model own_numpy_model:build          # with examples/ on PYTHONPATH
    python examples/own_numpy_model.py                     # a 2-peer swarm in this process

The swarm needs three things of a model (`swarmnode.Model`): `params`, one flat float32 vector
that holds every weight (the swarm averages, exchanges and checkpoints it, and its optimizer
updates it in place), the loss and gradient of a batch, and an evaluation. Nothing here imports
swarmnode: the layers are views into `params`, so they always see the current weights.
"""

import numpy as np


class TwoLayerNet:
    """x -> relu(x W1 + b1) W2 + b2 -> softmax cross-entropy."""

    def __init__(self, n_in=64, n_hidden=128, n_out=10, seed=0):
        sizes = [(n_in, n_hidden), (n_hidden,), (n_hidden, n_out), (n_out,)]
        self.shapes = sizes  # optional: lets --compress lowrank factor each matrix
        self.params = np.zeros(sum(int(np.prod(s)) for s in sizes), dtype=np.float32)
        self.grad = np.zeros_like(self.params)
        views, grads, at = [], [], 0
        for s in sizes:
            n = int(np.prod(s))
            views.append(self.params[at : at + n].reshape(s))
            grads.append(self.grad[at : at + n].reshape(s))
            at += n
        self.W1, self.b1, self.W2, self.b2 = views
        self.gW1, self.gb1, self.gW2, self.gb2 = grads
        rng = np.random.default_rng(seed)  # same seed on every peer: the same start
        self.W1[...] = rng.normal(0, np.sqrt(2 / n_in), (n_in, n_hidden))
        self.W2[...] = rng.normal(0, np.sqrt(1 / n_hidden), (n_hidden, n_out))

    def _forward(self, x):
        x = x.reshape(len(x), -1)
        h = np.maximum(x @ self.W1 + self.b1, 0)
        logits = h @ self.W2 + self.b2
        p = np.exp(logits - logits.max(axis=1, keepdims=True))
        return x, h, p / p.sum(axis=1, keepdims=True)

    def loss_and_grad(self, x, y):
        x, h, p = self._forward(x)
        n = len(y)
        loss = -np.log(p[np.arange(n), y] + 1e-12).mean()
        d = p.copy()
        d[np.arange(n), y] -= 1
        d /= n
        self.gW2[...] = h.T @ d
        self.gb2[...] = d.sum(axis=0)
        dh = (d @ self.W2.T) * (h > 0)
        self.gW1[...] = x.T @ dh
        self.gb1[...] = dh.sum(axis=0)
        return loss, self.grad

    def evaluate(self, x, y):
        _, _, p = self._forward(x)
        loss = -np.log(p[np.arange(len(y)), y] + 1e-12).mean()
        return loss, (p.argmax(axis=1) == y).mean()


def build(seed=0):
    """The factory `--model own_numpy_model:build` calls (with --seed, as it names `seed`)."""
    return TwoLayerNet(seed=seed)


def main(steps=600):
    """Two peers in this process, each on its half of the bundled digits, exchanging their
    models every 10 steps; prints each one's final test accuracy."""
    import asyncio

    import swarmnode  # only this runner needs swarmnode: the model above does not

    rounds = {"a": 0, "b": 0}

    def counter(name):
        def on_exchange(result):
            rounds[name] += result.applied

        return on_exchange

    async def swarm():
        # step_time: this model takes ~50 us a step, so unpaced the first peer would be done
        # before the second one had joined; 2 ms a step makes them train side by side
        settings = dict(data="digits", steps=steps, step_time=0.002, sync_every=10)
        async with swarmnode.Peer(build, shard=(0, 2), on_exchange=counter("a"), **settings) as a:
            async with swarmnode.Peer(
                build, shard=(1, 2), join=a, on_exchange=counter("b"), **settings
            ) as b:
                return await asyncio.gather(a.wait(), b.wait())

    for name, metrics in zip("ab", asyncio.run(swarm()), strict=True):
        print(
            f"peer {name}: test accuracy {metrics.test_acc:.1%} after {metrics.step} steps, "
            f"{rounds[name]} exchange rounds of its own"
        )


if __name__ == "__main__":
    main()
