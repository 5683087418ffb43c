"""`Swarm` and `AsyncSwarm`: the swarm handle for a training loop that is the user's.

    swarm = swarmnode.Swarm(model, join="10.0.0.5:7070", sync_every=10)  # a torch module, or
    for x, y in loader:                                                # a flat float32 vector
        loss = loss_fn(model(x), y); loss.backward(); opt.step(); opt.zero_grad()
        swarm.step()          # cheap; a round every sync_every steps, its mix landed in place
    swarm.close()             # announce the leave, stop every task, join the thread

The peer runs on an event loop of its own, on a background thread (node/swarm/loop_thread.py):
the constructor starts it, joins the swarm and loads the swarm's model into the user's
parameters (the median of up to three donors) before it returns, so the first step already
trains the swarm's model. `step()` never waits on the network but at the staleness bound
(`max_lead` x `sync_every` steps past the last round), and that wait shows in `utilization()`.
The outer step (`outer_lr`, `outer_momentum`) is swarmnode's, applied to each round's mix as
in the built-in loop; the inner optimizer, its state and its schedule stay the user's.
`AsyncSwarm` is the same for an asyncio program: `async with AsyncSwarm(model) as swarm`,
`await swarm.step()`; waiting at the bound then never blocks the program's loop.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
from collections.abc import Iterable, MutableMapping
from typing import Any

from swarmnode.node.peer import Node
from swarmnode.node.settings import validated
from swarmnode.node.swarm import torch_binding
from swarmnode.node.swarm.binding import Binding, bind_arrays, bind_vector
from swarmnode.node.swarm.errors import SwarmClosedError, SwarmError
from swarmnode.node.swarm.loop_thread import LoopThread
from swarmnode.node.swarm.own_node import OwnLoopNode
from swarmnode.node.swarm.own_worker import OwnLoopWorker
from swarmnode.node.swarm.settings import check_own_loop, config_from, own_loop
from swarmnode.node.train import WorkerMetrics

log = logging.getLogger(__name__)

START_SLACK_S = 30.0  # beyond the join's own deadlines (two: the join, the state sync)
CLOSE_WAIT_S = 10.0  # the peer's close is bounded by itself (node.CLOSE_BUDGET_S)


class _Handle:
    """What both handles share: the binding, the settings, the loop, the peer, the worker."""

    def __init__(self, model: Any, *, join: Any = None, **settings: Any) -> None:
        check_own_loop(settings)
        cfg = config_from(**settings)
        self.binding: Binding = bind(model)
        self.config = own_loop(cfg, self.binding.kind, self.binding.size)
        if join is not None:
            self.config.join = _addresses(join)
        validated(self.config)  # now, and its error names a setting as given here: `max_lead=`
        self._loop: LoopThread | None = None
        self._node: OwnLoopNode | None = None
        self._worker: OwnLoopWorker | None = None
        self._closed = False

    def _start_timeout(self) -> float:
        return 2 * self.config.join_timeout + START_SLACK_S

    def _started(self, node: OwnLoopNode) -> None:
        self._node = node
        self._worker = node.worker
        assert self._loop is not None
        self._loop.submit(_watch(node))

    # --- looking at it -------------------------------------------------------------------

    @property
    def params(self) -> Any:
        """The flat float32 vector the swarm exchanges: the model's own memory (numpy/cupy)."""
        return self.binding.vector

    @property
    def addr(self) -> str:
        """`HOST:PORT` this peer serves on: what another peer's `join` names."""
        return self._peer().addr

    @property
    def peer_id(self) -> str:
        return self._peer().peer_id

    @property
    def step_count(self) -> int:
        """The swarm's step counter: a joiner continues the swarm's, a resumed peer its own."""
        return int(self._peer().trainer.step_count)

    @property
    def rounds(self) -> int:
        """This peer's exchange rounds that landed a mix."""
        return int(self._peer().exchanger.rounds_applied)

    def live_peers(self) -> list[str]:
        """The addresses of the other live members this peer knows."""
        return [m.addr for m in self._peer().membership.live_peers()]

    @property
    def metrics(self) -> WorkerMetrics:
        return self._peer().worker.metrics()

    def utilization(self) -> float:
        """The share of the loop's time not spent waiting at the staleness bound (1.0: the
        compute sets the pace; lower: the network does)."""
        return self._peer().worker.utilization()

    def report(self, test_loss: float = float("nan"), test_acc: float = float("nan")) -> None:
        """Your loop's own evaluation, shown as this peer's (`swarmnode status`, the page)."""
        self._own_worker().report(test_loss, test_acc)

    def state_dict(self) -> dict[str, Any]:
        """The swarm's own state (step counter, outer step, peer id, key directory), to keep
        beside your model's and optimizer's in your checkpoint. No parameters: those are
        your model's."""
        node = self._peer()
        state = self._own_worker().state()
        state["peer_id"] = node.peer_id
        directory = node.cfg.checkpoint_dir
        state["checkpoint_dir"] = None if directory is None else str(directory)
        return state

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore `state_dict()` (between two steps): the outer step, and the step counter
        unless the swarm's, taken at the join, is further on. The peer's id is its key's:
        give the same `checkpoint_dir` to rejoin under the saved id."""
        node = self._peer()
        saved = state.get("peer_id") if isinstance(state, dict) else None
        if saved is not None and saved != node.peer_id:
            log.warning(
                "the swarm state was saved by peer %s; this one is %s (pass checkpoint_dir=%r "
                "to rejoin under the saved id)",
                saved,
                node.peer_id,
                state.get("checkpoint_dir"),
            )
        self._own_worker().load_state(state)

    def _peer(self) -> Node:
        if self._node is None:
            raise SwarmClosedError("the swarm is not started (AsyncSwarm: `async with` it first)")
        return self._node

    def _own_worker(self) -> OwnLoopWorker:
        if self._worker is None:
            raise SwarmClosedError("the swarm is not started (AsyncSwarm: `async with` it first)")
        return self._worker

    def __repr__(self) -> str:
        where = self._node.addr if self._node is not None else "not started"
        return f"<{type(self).__name__} {self.binding.kind} at {where}>"


class Swarm(_Handle):
    """The swarm handle of a loop of your own (see the module's docstring). `model`: a torch
    `nn.Module`, a flat numpy/cupy float32 vector your loop updates in place, or a dict of
    such arrays; `join`: `HOST:PORT`s (or Swarms) of a running swarm; `**settings`: the keys
    of `swarmnode.Peer` (`sync_every`, `max_lead`, `outer_lr`, `outer_momentum`, `listen`,
    `secret`, `checkpoint_dir`, `name`, ...). Starts the peer and joins before it returns."""

    def __init__(self, model: Any, *, join: Any = None, **settings: Any) -> None:
        super().__init__(model, join=join, **settings)
        self._loop = LoopThread()
        try:
            node = self._loop.call(
                OwnLoopNode.start_over(self.config, self.binding), self._start_timeout()
            )
        except concurrent.futures.TimeoutError:
            self._loop.stop()
            raise SwarmError(
                f"the swarm's peer did not start within {self._start_timeout():.0f} s"
            ) from None
        except BaseException:
            self._loop.stop()
            raise
        self._started(node)

    def step(self, loss: float | None = None) -> None:
        """After each of your optimizer steps. `loss` (a number, optional): shown in the
        status; a tensor costs a device sync, pass `loss.item()` if you compute it anyway."""
        worker = self._worker
        if worker is None:
            raise SwarmClosedError("the swarm is closed: Swarm.step() after close()")
        if worker.count_step(loss):
            worker.finish_step()

    def close(self) -> None:
        """Leave the swarm (announce it, stop every task, save the swarm's checkpoint with
        `checkpoint_dir`), then stop the background loop. Idempotent."""
        if self._closed or self._loop is None:
            return
        self._closed = True
        try:
            if self._node is not None:
                self._loop.call(self._node.close(), CLOSE_WAIT_S)
        finally:
            self._worker = None
            self._loop.stop()

    def __enter__(self) -> Swarm:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class AsyncSwarm(_Handle):
    """`Swarm` for an asyncio program: `async with AsyncSwarm(model, ...) as swarm:` starts
    it (the peer still runs on a loop of its own), `await swarm.step()` after each optimizer
    step; a wait at the staleness bound is awaited, so the program's loop keeps running."""

    async def start(self) -> AsyncSwarm:
        if self._loop is not None:
            raise RuntimeError("this AsyncSwarm was started already")
        self._loop = LoopThread()
        try:
            node = await asyncio.wait_for(
                self._loop.wrap(OwnLoopNode.start_over(self.config, self.binding)),
                self._start_timeout(),
            )
        except BaseException:
            await asyncio.to_thread(self._loop.stop)
            raise
        self._started(node)
        return self

    async def step(self, loss: float | None = None) -> None:
        worker = self._worker
        if worker is None:
            raise SwarmClosedError("the swarm is closed (or not started): step() refused")
        if worker.count_step(loss):
            if worker._held():  # the wait runs off this loop; the landing is as cheap as ever
                await asyncio.to_thread(worker.finish_step)
            else:
                worker.finish_step()

    async def close(self) -> None:
        if self._closed or self._loop is None:
            return
        self._closed = True
        try:
            if self._node is not None:
                await asyncio.wait_for(self._loop.wrap(self._node.close()), CLOSE_WAIT_S)
        finally:
            self._worker = None
            await asyncio.to_thread(self._loop.stop)

    async def __aenter__(self) -> AsyncSwarm:
        return await self.start()

    async def __aexit__(self, *exc: object) -> None:
        await self.close()


def bind(model: Any) -> Binding:
    """The `Binding` of what `Swarm(model)` was given (node/swarm/binding.py)."""
    if torch_binding.is_module(model):
        return torch_binding.bind_module(model)
    if isinstance(model, MutableMapping):
        return bind_arrays(model)
    return bind_vector(model)


async def _watch(node: Node) -> None:
    """An owned task of the peer crashed: the next step says so (close() still works)."""
    await node.wait()
    if node.crashed is not None and isinstance(node.worker, OwnLoopWorker):
        node.worker._break(SwarmClosedError(f"the swarm's peer stopped: {node.crashed}"))


def _addresses(join: Any) -> list[str]:
    items: Iterable[Any] = [join] if isinstance(join, str | _Handle) else join
    return [item.addr if isinstance(item, _Handle) else str(item) for item in items]
