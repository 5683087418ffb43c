"""`WorkerStore`: the exchange's `ParamStore` over the node's training thread.

Snapshots are copies taken between two steps (straight into a wire frame when the exchange asks
for one); received models are folded, on this store's own thread, into the worker's pending
update (`swarmnode.node.train.mixing.mixes`), which the training thread applies between two
steps; a state sync's load replaces the model and waits until it has. Its in-process twin,
for tests and simulations: `swarmnode.gossip.exchange.InMemoryStore`.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import weakref
from typing import TYPE_CHECKING, Any

import numpy as np
from swarmnode.gossip.robust import distance as model_distance
from swarmnode.gossip.robust import norm as model_norm
from swarmnode.gossip.wire import encode_into_frame, floats
from swarmnode.node.train import TrainingWorker

if TYPE_CHECKING:
    from swarmnode.gossip.exchange import Moved

log = logging.getLogger(__name__)


class WorkerStore:
    """The `ParamStore` the exchange sees: snapshots and mixes go through the training thread."""

    # off: a fresh frame for every request (scripts/bench/compute/swarm_step.py)
    share_frames = True

    def __init__(self, worker: TrainingWorker) -> None:
        self.worker = worker
        self.size = int(worker.trainer.model.params.data.size)
        self._folder = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="swarmnode-mix")
        self._xp = worker.trainer.backend.xp if hasattr(worker.trainer, "backend") else np
        # the last frame of my model, shared while it is in flight and the model unchanged
        self._frame: tuple[weakref.ref[memoryview], str, Any] | None = None
        self.frames_shared = 0  # snapshots answered with a frame in flight (tests, benchmarks)

    async def snapshot(self) -> tuple[int, np.ndarray]:
        """(step, a host copy of the model) in a reused buffer (`bufpool.MODELS`: no page
        faults), never one still referenced."""
        return await asyncio.to_thread(self._snapshot)

    def _snapshot(self) -> tuple[int, np.ndarray]:
        out = floats(self.size)
        return self.worker.snapshot_into(out), out

    async def snapshot_frame(self, sender: str) -> memoryview:
        """The model as a wire frame, copied once, straight from the model into the frame; or
        the frame of it still in flight (my round's push, an answer to a push) where the model
        has not changed since that one was taken: one snapshot in flight instead of one per
        request. "Not changed": the worker's `model_version()` (steps counted, landings) is the
        same; a worker without one gets a fresh frame every time."""
        version = self._version()
        shared = self._shared(sender, version)
        if shared is not None:
            self.frames_shared += 1
            return shared
        frame = await asyncio.to_thread(
            encode_into_frame, self.size, self.worker.snapshot_into, sender=sender
        )
        if version is not None and self._version() == version:  # taken within that version
            self._frame = (weakref.ref(frame), sender, version)
        return frame

    def _version(self) -> Any:
        of = getattr(self.worker, "model_version", None)
        return of() if of is not None else None

    def _shared(self, sender: str, version: Any) -> memoryview | None:
        """The last frame, if something still holds it (a frame nobody holds goes back to the
        pool, to be overwritten), it is of `sender`, and of this very model."""
        if self._frame is None or version is None or not self.share_frames:
            return None
        ref, of, at = self._frame
        frame = ref()
        return frame if frame is not None and of == sender and at == version else None

    async def distance(self, other: np.ndarray) -> float:
        """|x - other| to the model between two updates: one pass over both, no copy (the
        parameter lock is held ~6 ms per 100 MB, what a snapshot copy held it for)."""
        return await asyncio.to_thread(self.worker.read, lambda x: model_distance(x, other))

    async def norm(self) -> float:
        return await asyncio.to_thread(self.worker.read, model_norm)

    async def mix_in(
        self, other: np.ndarray, weight: float, source: str = "", moved: Moved | None = None
    ) -> None:
        """Fold x <- (1 - w) x + w other into the worker's pending update and return: it lands
        between two steps, and neither an exchange nor a pushpull answer waits for that step.
        The fold runs on this store's own thread, so a pushpull answer does not wait for it
        either; folds keep their order, and the received buffer is freed once folded. Its
        move is added to `moved` there, against the model and what is pending before it, and
        then this returns: the round that lands by `moved` must find the move in it."""
        try:
            fut = self._folder.submit(self.worker.mix, other, weight, source=source, moved=moved)
        except RuntimeError:  # closed: this peer is leaving, and its model with it
            log.info("leaving: a received model arrived after the last fold and is dropped")
            return
        fut.add_done_callback(_log_failed_mix)
        if moved is not None:  # a failed fold is logged by the callback, not raised here
            await asyncio.wait([asyncio.wrap_future(fut)])

    async def outer_step(self, lr: float, momentum: float) -> None:
        """Queue the outer step (`node.train.mixing.mixes.OuterStep`) behind every mix queued so
        far: the fold thread is FIFO, so the step lands after this round's mix, between two
        steps."""
        try:
            fut = self._folder.submit(self.worker.request_outer_step, lr, momentum)
        except RuntimeError:  # closed: leaving
            return
        fut.add_done_callback(_log_failed_mix)

    async def heading(self) -> np.ndarray | None:
        """A copy of the outer step's momentum (`OuterStep.back`), read on the training thread
        between two steps (it owns the outer step); None before any."""
        return await asyncio.wrap_future(await self._submit(lambda _x: self.worker.outer.back()))

    async def nudge(self, delta: np.ndarray, weight: float) -> None:
        """Fold x <- x + w delta (a compressed exchange's gossip step), like `mix_in`."""
        try:
            fut = self._folder.submit(self.worker.mix, delta, weight, additive=True)
        except RuntimeError:  # closed: leaving
            return
        fut.add_done_callback(_log_failed_mix)

    async def load(self, vector: np.ndarray) -> None:
        """Overwrite the parameters (state sync); returns once they are loaded."""
        xp = self._xp

        self._frame = None  # the model is being replaced: no frame of the old one goes out

        def load(x: Any) -> None:
            self.worker.mixes.discard()  # mixes into the model being replaced are moot
            x[...] = xp.asarray(vector, dtype=x.dtype)
            self.worker.outer.forget()  # its momentum was about the model just replaced

        await asyncio.wrap_future(await self._submit(load))

    async def settled(self) -> None:
        """Until every mix accepted so far is folded (and, with training stopped, applied)."""
        await asyncio.wrap_future(self._folder.submit(lambda: None))  # one FIFO thread

    async def close(self) -> None:
        """Finish the folds already accepted (each is tens of ms), then stop the fold thread."""
        await asyncio.to_thread(self._folder.shutdown, wait=True)

    async def _submit(self, fn: Any) -> concurrent.futures.Future[Any]:
        # submit() only queues while the thread runs, but runs fn inline (a 100 MB mix) when it
        # does not: keep that off the event loop. Waiting for the result holds no thread.
        return await asyncio.to_thread(self.worker.submit, fn)


def _log_failed_mix(fut: concurrent.futures.Future[Any]) -> None:
    if not fut.cancelled() and fut.exception() is not None:
        log.error("mixing a received model failed: %s", fut.exception())
