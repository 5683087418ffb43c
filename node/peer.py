"""`Node`: one swarm peer — trainer thread, aiohttp service, membership, exchange, checkpoints.

Lifecycle: `node = await Node.create(cfg)` binds the port, joins (and syncs state from the swarm
when there is one), and starts training; `await node.wait()` returns when the step budget is spent
or `request_stop()` was called (SIGTERM/SIGINT); `await node.close()` announces `left`, stops every
task it owns, checkpoints and releases the port. `asyncio.run` appears only in the CLI.

The event loop only routes messages. Training runs on the worker's thread; snapshots, mixes,
encoding, decoding and aggregation of parameter vectors run in threads too.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import random
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from fault.byzantine import parse_byzantine
from fault.spec import parse_fault_spec
from fault.transport import FaultyTransport
from gossip.auth import HEADER_BYTES as AUTH_HEADER_BYTES
from gossip.auth import AuthTransport, Signer, auth_handlers
from gossip.codec import MAX_CONTROL_BYTES
from gossip.exchange import Exchanger
from gossip.membership import Membership, MembershipConfig
from kernels.backend import to_numpy
from kernels.errors import SwarmnodeError
from node.byzantine_serving import ByzantineServing
from node.checkpoint import save_checkpoint
from node.cmd_start import build_trainer, resume, run_meta
from node.errors import JoinError
from node.http_app import build_app, serve
from node.http_transport import HttpTransport
from node.identity import load_identity
from node.peer_admin import admin_routes
from node.peer_config import PeerConfig, parse_hostport
from node.peer_status import status_routes
from node.state_sync import sync_from_swarm
from node.worker import TrainingWorker, WorkerMetrics

log = logging.getLogger(__name__)

STEP_POLL_S = 0.02  # how often the exchange loop looks at the step counter
META_EVERY_S = 0.25  # how often training progress is copied into the gossiped member meta
LEAVE_DEADLINE_S = 1.0
REJOIN_EVERY_S = 5.0


class WorkerStore:
    """The `ParamStore` the exchange sees: snapshots and mixes go through the training thread."""

    def __init__(self, worker: TrainingWorker) -> None:
        self.worker = worker
        self.size = int(worker.trainer.model.params.data.size)
        self._xp = worker.trainer.backend.xp if hasattr(worker.trainer, "backend") else np

    async def snapshot(self) -> tuple[int, np.ndarray]:
        return await asyncio.to_thread(self.worker.snapshot)

    async def mix_in(self, other: np.ndarray, weight: float) -> None:
        xp = self._xp

        def mix(x: Any) -> None:
            # x <- (1 - w) x + w other, in place so the layers' views stay valid
            x *= 1.0 - weight
            x += weight * xp.asarray(other, dtype=x.dtype)

        await self.run(mix)

    async def load(self, vector: np.ndarray) -> None:
        xp = self._xp

        def load(x: Any) -> None:
            x[...] = xp.asarray(vector, dtype=x.dtype)

        await self.run(load)

    async def run(self, fn: Any) -> Any:
        # submit() runs fn inline when the thread is not running: keep that off the event loop
        return await asyncio.to_thread(lambda: self.worker.submit(fn).result())


class MembershipPeers:
    """The exchange's `PeerDirectory` over membership: uniform over live peers."""

    def __init__(self, membership: Membership, rng: random.Random) -> None:
        self.membership = membership
        self.rng = rng

    def sample(self, k: int) -> list[tuple[str, str]]:
        live = [(m.peer_id, m.addr) for m in self.membership.live_peers()]
        return self.rng.sample(live, min(k, len(live)))


class Node:
    """One swarm peer. Build with `await Node.create(cfg)`; always `await node.close()`."""

    def __init__(
        self, cfg: PeerConfig, on_eval: Callable[[WorkerMetrics], None] | None = None
    ) -> None:
        self.cfg = cfg
        self.on_eval = on_eval
        self.addr = ""
        self.peer_id = ""
        self.incarnation = 0
        self.started_at = time.monotonic()
        self._stop = asyncio.Event()
        self._tasks: set[asyncio.Task[Any]] = set()
        self._runner: Any = None
        self._closed = False
        self.state = "starting"

    # --- lifecycle -----------------------------------------------------------------------

    @classmethod
    async def create(
        cls, cfg: PeerConfig, on_eval: Callable[[WorkerMetrics], None] | None = None
    ) -> Node:
        """A started peer; `on_eval` is called on the training thread after every evaluation."""
        node = cls(cfg.validate(), on_eval)
        try:
            await node._start()
        except BaseException:
            await node.close()
            raise
        return node

    async def _start(self) -> None:
        cfg = self.cfg
        ident = await asyncio.to_thread(load_identity, cfg.checkpoint_dir, cfg.peer_id)
        self.peer_id, self.incarnation = ident.peer_id, ident.incarnation
        self.rng = random.Random(f"{cfg.seed}/{self.peer_id}/{self.incarnation}")
        self.trainer, self.data, self.backend = await asyncio.to_thread(self._build_trainer)
        self.resumed = await asyncio.to_thread(resume, self.trainer, cfg)
        self.start_step = self.trainer.step_count
        self.worker = self._build_worker()
        self.store = WorkerStore(self.worker)

        self.signer = Signer(cfg.secret) if cfg.secret else None

        host, port = parse_hostport(cfg.listen, "--listen")
        self._handlers: dict[str, Any] = {}
        app = build_app(
            self._handlers,
            max_body_bytes=_body_caps(cfg),
            extra_routes=status_routes(self) + admin_routes(self),
        )
        self._runner, bound = await serve(app, host, port)
        self.addr = cfg.advertise or f"{_dialable(host)}:{bound}"
        # Built once the address is known: partitions compare it to the others' addresses
        # (FaultyTransport keeps it from construction; it has no setter).
        self.faults = FaultyTransport(
            HttpTransport(), parse_fault_spec(cfg.fault), cfg.seed, self.addr
        )
        transport = AuthTransport(self.faults, self.signer) if self.signer else self.faults

        self.membership = Membership(
            self.peer_id,
            self.addr,
            transport,
            self._membership_config(),
            incarnation=self.incarnation,
        )
        self.byzantine = ByzantineServing(cfg.byzantine, self)
        self.exchanger = Exchanger(
            cfg.exchange,
            self_id=self.peer_id,
            transport=transport,
            store=self.store,
            peers=MembershipPeers(self.membership, self.rng),
            outgoing=self.byzantine.outgoing,
        )
        handlers = {**self.membership.handlers(), **self.exchanger.handlers()}
        self._handlers.update(auth_handlers(handlers, self.signer) if self.signer else handlers)
        self._update_meta()

        if cfg.join:
            await self.membership.join(cfg.join, timeout=cfg.join_timeout)
        await self.membership.start()
        if cfg.join:
            await sync_from_swarm(self)
        await asyncio.to_thread(
            self.worker.evaluate_now
        )  # first reported accuracy: the start model
        self.worker.start()
        self.state = "alive"
        self._spawn(self._exchange_loop(), "exchange")
        self._spawn(self._meta_loop(), "meta")
        self._spawn(self._watch_worker(), "watch-worker")
        self._spawn(self.byzantine.run(), "byzantine-views")
        if cfg.join:
            self._spawn(self._rejoin_loop(), "rejoin")
        await asyncio.to_thread(self._write_ready_file)
        log.info("peer %s serving on %s", self.peer_id, self.addr)

    def _build_trainer(self) -> tuple[Any, Any, Any]:
        trainer, data, backend = build_trainer(self.cfg)
        behaviour = parse_byzantine(self.cfg.byzantine) if self.cfg.byzantine else None
        self.labels_flipped = behaviour is not None and behaviour.poisons_labels
        if self.labels_flipped:
            trainer.set_labels(behaviour.transform_labels(trainer.labels(), data.n_classes))
        return trainer, data, backend

    def _build_worker(self) -> TrainingWorker:
        cfg = self.cfg
        worker = TrainingWorker(
            self.trainer,
            X_test=self.data.X_test,
            y_test=self.data.y_test,
            eval_every=cfg.eval_every,
            max_steps=cfg.steps or None,
            device=self.backend.describe(),
            on_eval=self.on_eval,
            on_checkpoint=self._save_checkpoint if cfg.checkpoint_dir is not None else None,
            checkpoint_every=cfg.checkpoint_every,
        )
        if cfg.slowdown > 1:
            worker.set_throttle(slowdown=cfg.slowdown)
        return worker

    def _membership_config(self) -> MembershipConfig:
        cfg = self.cfg
        kw: dict[str, Any] = {"fanout": cfg.fanout}
        if cfg.suspect_after is not None:
            kw["suspect_after"] = cfg.suspect_after
        if cfg.dead_after is not None:
            kw["dead_after"] = cfg.dead_after
        return MembershipConfig.for_interval(cfg.gossip_interval, **kw)

    def request_stop(self) -> None:
        """Ask the peer to leave (signal-handler safe: only sets a flag)."""
        self._stop.set()

    async def wait(self) -> None:
        """Until a stop is requested, or the step budget is spent."""
        await self._stop.wait()

    async def close(self) -> None:
        """Leave the swarm, stop every owned task and the training thread, checkpoint, unbind."""
        if self._closed:
            return
        self._closed = True
        self.state = "leaving"
        membership = getattr(self, "membership", None)
        if membership is not None:
            await _quietly(membership.leave(), LEAVE_DEADLINE_S, "leave announcement")
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        if membership is not None:
            await membership.close()
        worker = getattr(self, "worker", None)
        if worker is not None:
            await asyncio.to_thread(worker.stop, 10.0)
            if self.cfg.checkpoint_dir is not None and self.trainer.step_count > 0:
                await asyncio.to_thread(self._save_checkpoint, None)
        if self._runner is not None:
            await self._runner.cleanup()
        faults = getattr(self, "faults", None)
        if faults is not None:
            await faults.close()

    # --- background tasks ----------------------------------------------------------------

    def _spawn(self, coro: Any, name: str) -> None:
        task = asyncio.create_task(coro, name=f"{self.peer_id}:{name}")
        self._tasks.add(task)

    async def _exchange_loop(self) -> None:
        every = self.cfg.exchange.sync_every
        target = self.trainer.step_count + every
        while self.worker.running:
            if self.trainer.step_count < target:
                await asyncio.sleep(STEP_POLL_S)
                continue
            if self.membership.live_peers():
                await self.exchanger.round()
            target = max(target + every, self.trainer.step_count + 1)

    async def _meta_loop(self) -> None:
        while True:
            self._update_meta()
            await asyncio.sleep(META_EVERY_S)

    async def _watch_worker(self) -> None:
        """The step budget is spent: stop like on SIGTERM. Training failed: see `_fail`."""
        await asyncio.to_thread(self.worker.join)
        if self.worker.error is not None and self.membership.live_peers():
            await self._fail(self.worker.error)
            return
        if self.worker.error is not None:
            log.error("training stopped: %s", self.worker.error)
        self._update_meta()
        self._stop.set()

    async def _fail(self, error: BaseException) -> None:
        """Training failed inside a swarm (typically diverged after mixing in a poisoned model).

        Exiting would hide what happened; staying in the exchange would hand the broken model to
        the others. So the peer stops serving its parameters, leaves the membership (the others
        mark it `left` and stop sampling it), and keeps answering /v1/status with state `failed`
        and the accuracy of the model it now holds, until SIGTERM (then exit code 2, as before).
        A peer alone exits at once instead: nobody is there to look, and a script gets the code.
        """
        self.state = "failed"
        self.exchanger.stop_serving(f"training failed: {error}")
        log.error(
            "training stopped: %s; left the swarm, /v1/status reports 'failed' until SIGTERM", error
        )
        await asyncio.to_thread(self.worker.evaluate_now)
        self._update_meta()
        await _quietly(self.membership.leave(), LEAVE_DEADLINE_S, "leave announcement")

    async def _rejoin_loop(self) -> None:
        """Alone for too long (a partition outlived the tombstones): knock on the seeds again."""
        while True:
            await asyncio.sleep(REJOIN_EVERY_S)
            if self.state != "alive" or self.membership.live_peers():
                continue  # a failed peer has left on purpose
            try:
                await self.membership.join(self.cfg.join, timeout=REJOIN_EVERY_S)
                log.info("re-joined the swarm through the seeds")
            except SwarmnodeError as exc:
                log.info("re-join attempt failed: %s", exc)

    def _update_meta(self) -> None:
        m = self.worker.metrics()
        self.membership.set_meta(
            step=int(m.step),
            loss=_finite_or_none(m.loss),
            acc=_finite_or_none(m.test_acc),
            device=m.device,
        )

    # --- helpers -------------------------------------------------------------------------

    def _save_checkpoint(self, state: dict[str, Any] | None) -> None:
        state = self.worker.state() if state is None else state
        state["meta"] = run_meta(self.cfg)
        save_checkpoint(self.cfg.checkpoint_dir, state, keep=self.cfg.keep_checkpoints)

    def _write_ready_file(self) -> None:
        if not self.cfg.ready_file:
            return
        path = Path(self.cfg.ready_file)
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_text(json.dumps({"peer_id": self.peer_id, "addr": self.addr, "pid": os.getpid()}))
        os.replace(tmp, path)

    def params_host(self) -> np.ndarray:
        return to_numpy(self.trainer.model.params.data)


def _body_caps(cfg: PeerConfig) -> dict[str, int]:
    """Per-route caps, checked before a body is read: only pushpull carries a model inbound;
    control routes never need more than a control message (plus its HMAC envelope)."""
    envelope = AUTH_HEADER_BYTES if cfg.secret else 0
    return {
        "pushpull": int(cfg.max_body_mb * 2**20) + envelope,
        "*": MAX_CONTROL_BYTES + envelope,
    }


def _dialable(host: str) -> str:
    return "127.0.0.1" if host in ("0.0.0.0", "", "::") else host


def _finite_or_none(x: float) -> float | None:
    return float(x) if x is not None and np.isfinite(x) else None


async def _quietly(coro: Any, timeout: float, what: str) -> None:
    try:
        await asyncio.wait_for(coro, timeout)
    except Exception as exc:  # best effort on the way out: log, never block shutdown
        log.info("%s did not complete: %s", what, exc)


__all__ = ["JoinError", "Node", "WorkerStore"]
