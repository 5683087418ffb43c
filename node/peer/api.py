"""`Peer`: one swarm peer started and stopped from Python (`swarmnode.Peer`).

    async with swarmnode.Peer(build, data="digits", steps=600) as a:        # founds a swarm
        async with swarmnode.Peer(build, join=a, steps=600) as b:          # joins it
            await asyncio.gather(a.wait(), b.wait())
    print(a.metrics.test_acc, b.metrics.test_acc)

    swarmnode.Peer("mlp:128", join="10.0.0.5:7070", sync_every=10).run()  # blocking

A thin front over `Node` (node/peer/node.py): the same peer as `swarmnode start`, with every
feature (exchange, robust aggregation, compression, checkpoints, join and leave, faults), its
settings the options of `swarmnode start` as keywords: the key with `_` (`sync_every=10`,
`exchange_timeout=3.0`, `push_budget="off"`; docs/options.md lists them all), read by the
settings room (`swarmnode.node.settings.from_keywords`). What differs from the CLI: it listens on
a free port of 127.0.0.1 unless told otherwise (`listen=`), installs no signal handlers (the
program that embeds it owns those), and the user's callbacks cannot stop it: one that raises is
logged, as theirs, and the peer goes on.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable
from typing import Any

import numpy as np
from swarmnode.gossip.exchange import RoundResult
from swarmnode.node.peer.node import Node
from swarmnode.node.settings import from_keywords, validated
from swarmnode.node.train import DEFAULT_MODEL, WorkerMetrics, user_error

log = logging.getLogger(__name__)

API_LISTEN = "127.0.0.1:0"  # a library must not take a fixed port unasked (the CLI's is 7070)


class Peer:
    """One peer. `model`: a spec (`"mlp:128"`, `"own_model:build"`), a factory, or a model
    (`swarmnode.Model`); `data`: a spec (`"digits"`, a `.npz`, a folder of `.npy`), a function,
    or `X_train, y_train, X_test, y_test`; `join`: peers or `HOST:PORT`s of a running swarm;
    `on_eval(metrics)` after each evaluation (on the training thread), `on_exchange(result)`
    after each exchange round (on the event loop); `**settings`: any option of `swarmnode
    start` by its key with `_` (`steps`, `lr`, `sync_every`, `exchange="robust"`, `compress`,
    `shard=(0, 2)`, `checkpoint_dir`, `name`, ...: docs/options.md), its value the text the flag
    takes or a number, a bool, a list as fits. A value of the wrong kind or an unknown keyword
    raises `ConfigError` at once; a value out of range when the peer starts."""

    def __init__(
        self,
        model: Any = DEFAULT_MODEL,
        data: Any = "digits",
        *,
        join: Any = None,
        on_eval: Callable[[WorkerMetrics], Any] | None = None,
        on_exchange: Callable[[RoundResult], Any] | None = None,
        **settings: Any,
    ) -> None:
        settings.setdefault("listen", API_LISTEN)
        # addresses only: parsed now, as any keyword's value (peers: once they are started)
        if join is not None and not _holds_a_peer(join):
            settings["join"], join = join, None
        self.config = from_keywords(model=model, data=data, **settings)
        self._join = join  # peers: their addresses are known once they are started
        self._on_eval = _guarded(on_eval, "on_eval")
        self._on_exchange = _guarded(on_exchange, "on_exchange")
        self.node: Node | None = None

    # --- lifecycle -----------------------------------------------------------------------

    async def start(self) -> Peer:
        """Build the model, serve, join (and copy the swarm's model), start training."""
        if self.node is not None:
            raise RuntimeError("this Peer was started already")
        if self._join is not None:
            self.config.join = _addresses(self._join)
        validated(self.config)  # its error names a setting as the keyword given here: `lr=`
        self.node = await Node.create(self.config, self._on_eval, self._on_exchange)
        return self

    async def wait(self) -> WorkerMetrics:
        """Until training ends (the `steps` budget; `steps=0` trains until `stop()`) or a stop;
        the final metrics. A failed training (a model that raised, a divergence) raises here;
        the peer has then stopped serving its model and left the swarm."""
        node = self._started()
        ended = asyncio.ensure_future(node.training_ended())
        stopped = asyncio.ensure_future(node.wait())
        try:
            await asyncio.wait({ended, stopped}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in (ended, stopped):
                task.cancel()
            await asyncio.gather(ended, stopped, return_exceptions=True)
        for error in (node.worker.error, node.crashed):
            if error is not None:
                raise error
        return node.worker.metrics()

    async def stop(self) -> None:
        """Leave the swarm, stop training, checkpoint (with `checkpoint_dir`), unbind."""
        if self.node is not None:
            self.node.request_stop()
            await self.node.close()

    async def __aenter__(self) -> Peer:
        return await self.start()

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    def run(self) -> WorkerMetrics:
        """Blocking: start, train until the budget is spent (or Ctrl-C), stop; final metrics."""

        async def main() -> WorkerMetrics:
            async with self:
                return await self.wait()

        return asyncio.run(main())

    # --- looking at it -------------------------------------------------------------------

    @property
    def addr(self) -> str:
        """`HOST:PORT` this peer serves on (what another peer's `join` names)."""
        return self._started().addr

    @property
    def peer_id(self) -> str:
        return self._started().peer_id

    @property
    def metrics(self) -> WorkerMetrics:
        """The latest progress: `step`, `loss`, `test_loss`, `test_acc`, `samples_per_s`, ..."""
        return self._started().worker.metrics()

    def params(self) -> np.ndarray:
        """A host copy of the flat parameter vector, taken between two steps."""
        return self._started().worker.snapshot()[1]

    def _started(self) -> Node:
        if self.node is None:
            raise RuntimeError("the Peer is not started: use `async with` or start() first")
        return self.node


def _holds_a_peer(join: Any) -> bool:
    if isinstance(join, Peer):
        return True
    return isinstance(join, list | tuple) and any(isinstance(item, Peer) for item in join)


def _addresses(join: Any) -> list[str]:
    items: Iterable[Any] = [join] if isinstance(join, str | Peer) else join
    out = []
    for item in items:
        out.append(item.addr if isinstance(item, Peer) else str(item))
    return out


def _guarded(fn: Callable[..., Any] | None, what: str) -> Callable[..., None] | None:
    """`fn`, whose errors are logged as the user's (once per kind) instead of stopping the
    peer: a progress callback must not be able to end a training run or an exchange loop."""
    if fn is None:
        return None
    seen: set[str] = set()

    def call(arg: Any) -> None:
        try:
            fn(arg)
        except Exception as exc:
            err = user_error(f"callback {what}", exc)
            if str(err) not in seen:
                seen.add(str(err))
                log.error("%s (the peer goes on)", err)

    return call
