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
import contextlib
import dataclasses
import logging
import math
import random
import time
from collections.abc import Callable
from typing import Any

import numpy as np
from swarmnode.fault.inject import FaultyTransport, parse_byzantine, parse_fault_spec
from swarmnode.gossip.auth import (
    SIGNED_ROUTES,
    AuthTransport,
    OperatorVerifier,
    Signer,
    auth_handlers,
)
from swarmnode.gossip.exchange import Exchanger, RoundResult
from swarmnode.gossip.link import MeasuringTransport
from swarmnode.gossip.membership import Membership
from swarmnode.kernels.backend import to_numpy
from swarmnode.kernels.errors import SwarmnodeError
from swarmnode.node.net import HttpTransport, build_app, serve
from swarmnode.node.peer.address import advertised, check_reachable
from swarmnode.node.peer.admin_routes import admin_routes
from swarmnode.node.peer.aio import quietly, threadsafe_setter
from swarmnode.node.peer.announce import (
    lr_mismatch,
    meta_loop,
    rejoin_loop,
    update_meta,
    write_ready_file,
)
from swarmnode.node.peer.byzantine_serving import ByzantineServing
from swarmnode.node.peer.errors import JoinError
from swarmnode.node.peer.identity import load_identity
from swarmnode.node.peer.limits import MembershipPeers, answer_cap, body_caps, intake_limits
from swarmnode.node.peer.log_name import set_log_name
from swarmnode.node.peer.page import EventLog, log_member_changes, page_routes, probe_loop
from swarmnode.node.peer.param_store import WorkerStore
from swarmnode.node.peer.reach import serve_reach, start_reach, watch_reach
from swarmnode.node.peer.shard_pick import pick_shard, shard_clash, shard_text
from swarmnode.node.peer.state_sync import JOINING, param_segments, shared_start, sync_from_swarm
from swarmnode.node.peer.status_routes import status_routes
from swarmnode.node.peer.trust import build_admission
from swarmnode.node.settings import PeerConfig, parse_hostport
from swarmnode.node.train import (
    TrainingWorker,
    WorkerMetrics,
    build_trainer,
    resume,
    run_meta,
    save_checkpoint,
)
from swarmnode.node.train.data import data_fingerprint
from swarmnode.node.train.lr import SwarmLR
from swarmnode.node.train.mixing import CollapseGuard

log = logging.getLogger(__name__)

STEP_POLL_S = 1.0  # fallback only: the worker wakes the exchange loop at its target step
LATE_POLL_S = 0.05  # held while every partner is suspect: how often to look again
FAILED_LINGER_S = 60.0  # a failed peer answers /v1/status this long, then exits (code 2)
LEAVE_DEADLINE_S = 1.0
BULK_ROUTES = ("params", "pushpull")  # a model crosses the wire: admitted once the body is read
# SIGTERM -> exit within 5 s (what an orchestrator's grace period and the chaos runner expect):
# close() spends at most this much; interpreter teardown and the summary take the rest.
CLOSE_BUDGET_S = 3.5
HTTP_SHUTDOWN_S = 0.5  # requests in flight at close get this long, then they are cancelled


class Node:
    """One swarm peer. Build with `await Node.create(cfg)`; always `await node.close()`."""

    def __init__(
        self,
        cfg: PeerConfig,
        on_eval: Callable[[WorkerMetrics], None] | None = None,
        on_exchange: Callable[[RoundResult], None] | None = None,
    ) -> None:
        self.cfg = cfg
        self.on_eval = on_eval
        self.on_exchange = on_exchange
        self.addr = ""
        self.peer_id = ""
        self.name = cfg.name
        self.addr_how = ""  # why this address (node/peer/address.py), for the start banner
        self.shard = shard_text(cfg.shard)  # in our member meta: `--shard auto` reads it
        self.incarnation = 0
        self.started_at = time.monotonic()
        self._stop = asyncio.Event()
        self._tasks: set[asyncio.Task[Any]] = set()
        self._runner: Any = None
        self._closed = False
        self.crashed: BaseException | None = None  # an owned task died of a bug: see _spawn
        self.worker_stopped = False  # close() saw the training thread end (final checkpoint)
        self.state = "starting"
        self.events = EventLog()  # what the page shows happening (node/web/events.py)
        self.watch: Any = None  # the page's fan-out (node/web/watch.py), built with the server
        self.faults: FaultyTransport | None = None  # only with --fault or the admin routes
        self.max_steps_between_rounds = 0  # the largest gap between two own rounds' ends
        # the data's fingerprint, set with the trainer; None where the data is a user's loop's
        self.data_print: str | None = None

    # --- lifecycle -----------------------------------------------------------------------

    @classmethod
    async def create(
        cls,
        cfg: PeerConfig,
        on_eval: Callable[[WorkerMetrics], None] | None = None,
        on_exchange: Callable[[RoundResult], None] | None = None,
    ) -> Node:
        """A started peer; `on_eval` is called on the training thread after every evaluation,
        `on_exchange` on the event loop after each of this peer's exchange rounds (both must
        be quick)."""
        return await cls._launch(cls(cfg.validate(), on_eval, on_exchange))

    @staticmethod
    async def _launch(node: Node) -> Node:
        """`node` started, or closed again (and the error raised) when a step of the start
        fails: nothing it bound or began outlives a failed start."""
        try:
            await node._start()
        except BaseException:
            await node.close()
            raise
        return node

    async def _start(self) -> None:
        """Each step builds what the next one needs: the model before the server (body caps
        are sized from it), the server before the network (partitions compare addresses),
        the network before the swarm, the swarm before training."""
        await self._load_model()
        await self._serve_http()
        self._build_network()
        serve_reach(self)  # before the join: a joiner may ask us to dial it back at once
        await self._enter_swarm()
        self.reachable = await start_reach(self)  # or outbound-only (node/peer/reach.py)
        if (watch := watch_reach(self)) is not None:  # and again when that may change
            self._spawn(watch.run(), "reach")
        await self._start_training()
        if self.cfg.ready_file:
            info = {"peer_id": self.peer_id, "name": self.name, "addr": self.addr}
            await asyncio.to_thread(write_ready_file, self.cfg.ready_file, info)
        log.info(
            "peer %s serving on %s; public key %s", self.peer_id, self.addr, self.key.public_hex
        )

    async def _load_model(self) -> None:
        """Identity, trainer (data, model, optimizer), resume, training worker, its store."""
        cfg = self.cfg
        ident = await asyncio.to_thread(load_identity, cfg.checkpoint_dir, cfg.peer_id)
        self.peer_id, self.incarnation, self.key = ident.peer_id, ident.incarnation, ident.key
        set_log_name(cfg.name or self.peer_id)
        if cfg.shard_auto:  # before the trainer: the shard decides its data
            shard = await pick_shard(
                cfg.join, self.peer_id, cfg.checkpoint_dir, cfg.join_timeout, cfg.secret or None
            )
            cfg = self.cfg = dataclasses.replace(cfg, shard=shard, shard_auto=False)
            self.shard = shard_text(shard)
        self.rng = random.Random(f"{cfg.seed}/{self.peer_id}/{self.incarnation}")
        self.trainer, self.data, self.backend = await asyncio.to_thread(self._build_trainer)
        self.resumed = await asyncio.to_thread(resume, self.trainer, cfg)
        self.start_step = self.trainer.step_count
        self.synced_step: int | None = None  # the swarm's step counter, copied at the join
        self._worker_done = asyncio.Event()
        self.worker = self._build_worker()
        self.store = WorkerStore(self.worker)
        # Signs our exchange requests with our key (and everything with the secret); checks
        # theirs against the member table's keys, filled in once membership exists.
        routes = SIGNED_ROUTES if cfg.sign_exchange else ()
        self.signer = Signer(cfg.secret or None, key=self.key, signed_routes=routes)
        self.operator = OperatorVerifier.load(cfg.admin_key) if cfg.enable_admin else None

    async def _serve_http(self) -> None:
        """Bind the server (routes filled in later by `_build_network`); learn our address,
        which signed requests must name to be opened here."""
        cfg = self.cfg
        host, port = parse_hostport(cfg.listen, "--listen")
        self._handlers: dict[str, Any] = {}
        app = build_app(
            self._handlers,
            max_body_bytes=body_caps(cfg, self.store.size),
            extra_routes=[
                *status_routes(self),
                *page_routes(self),  # GET /, the live page; read-only
                *(admin_routes(self) if self.operator else []),
            ],
            admission={route: cfg.exchange.max_inflight for route in BULK_ROUTES},
            intake=intake_limits(cfg, self.store.size),
            tap=self.signer.tap,  # envelopes are hashed while they arrive
        )
        self._runner, bound = await serve(app, host, port, shutdown_timeout=HTTP_SHUTDOWN_S)
        self.addr, self.addr_how = await asyncio.to_thread(
            advertised, host, bound, cfg.advertise, cfg.join
        )
        check_reachable(self.addr, cfg.join, "the seed")
        for named in filter(None, (self.signer, self.operator)):
            named.name = self.addr

    def _fault_layer(self, http: HttpTransport) -> FaultyTransport | None:
        """The fault-injecting wrapper, only where faults can be asked for: a `--fault` that
        injects something, or the admin routes (which set faults at runtime). Elsewhere every
        request would pay for a wrapper that never acts. Built once the address is known:
        partitions compare it to the others' addresses."""
        faults = parse_fault_spec(self.cfg.fault)
        if not (faults.active or self.cfg.enable_admin):
            return None
        return FaultyTransport(http, faults, self.cfg.seed, self.addr)

    def _build_network(self) -> None:
        """Transport (faults, auth), membership, byzantine serving, exchanger; their routes."""
        cfg = self.cfg
        http = HttpTransport(max_response_bytes=answer_cap(cfg, self.store.size))
        self.faults = self._fault_layer(http)
        wire = http if self.faults is None else self.faults
        transport = self.links = MeasuringTransport(AuthTransport(wire, self.signer))
        self.membership = Membership(
            self.peer_id,
            self.addr,
            transport,
            self.cfg.membership(),
            incarnation=self.incarnation,
            key=self.key,
            admission=build_admission(cfg, self.key, self.addr),
            backoff=transport.backoff,
            secret=bool(cfg.secret),  # a refused join names the secret on both sides
        )
        log_member_changes(self)
        self.byzantine = ByzantineServing(cfg.byzantine, self)
        peers = MembershipPeers(self.membership, self.rng, self.links, cfg.prefer_fast)
        self.signer.keys = peers.public_key
        self.exchanger = Exchanger(
            cfg.exchange,
            self_id=self.peer_id,
            transport=transport,
            store=self.store,
            peers=peers,
            outgoing=self.byzantine.outgoing,
            poisoning=lambda: self.byzantine.behaviour is not None,
            init=self.init_params,
            segs=param_segments(self.trainer),
            mix_after_answer=True,  # a pushed model is bounded while the answer is sent
        )
        # a mix of pushed models that kills units or jumps the loss for good is rolled back and its
        # senders' pushes are not mixed for a while (node/train/mixing/collapse.py)
        if cfg.exchange.push_budget:
            loop = asyncio.get_running_loop()
            self.worker.collapse = CollapseGuard(self.data.n_classes)
            self.worker.on_collapse = lambda senders: loop.call_soon_threadsafe(
                self.exchanger.distrust, senders
            )
        handlers = {**self.membership.handlers(), **self.exchanger.handlers()}
        self._handlers.update(auth_handlers(handlers, self.signer))
        if self.name is not None:  # signed with the rest of our record: nobody can rename us
            self.membership.set_meta(name=self.name)
        if self.shard is not None:
            self.membership.set_meta(shard=self.shard)
        if self.data_print is not None:
            self.membership.set_meta(data=self.data_print)
        if (schedule := getattr(self.trainer, "lr_schedule", None)) is not None:
            self.membership.set_meta(lr=schedule.print)  # a joiner compares it
        update_meta(self.worker, self.membership)

    async def _enter_swarm(self) -> None:
        """Join through the seeds and copy the swarm's model, or start a swarm of our own."""
        cfg = self.cfg
        if cfg.join:
            # Others see us alive from the join on and may pushpull with us: until the state
            # sync has loaded the swarm's model they must not mix in our fresh random one.
            self.exchanger.stop_serving(JOINING)
            await self.membership.join(cfg.join, timeout=cfg.join_timeout)
            self._check_swarm()
            self._refuse_other_data()
        await self.membership.start()
        if cfg.join:
            await sync_from_swarm(self, timeout=cfg.join_timeout)
            self._refuse_nothing_to_train()
            self._warn_other_lr()
            self.exchanger.resume_serving()

    def _refuse_nothing_to_train(self) -> None:
        """A joiner whose `--steps` target the swarm has passed would train 0 steps and end
        "done" (exit 0): a JoinError (exit 2) says so instead. `--steps` stays a target on the
        swarm's counter (the lr schedule runs on it; a checkpoint resumes it), not a count of
        steps this run; `--steps 0` trains until stopped."""
        steps = self.cfg.steps
        if self.synced_step is None or not steps or self.trainer.step_count < steps:
            return
        raise JoinError(
            f"the swarm is at step {self.trainer.step_count}, past this peer's target "
            f"(--steps {steps}): nothing to train; give --steps 0 (until stopped) or above "
            f"{self.trainer.step_count}"
        )

    def _warn_other_lr(self) -> None:
        """The live members decay their lr to another horizon than ours (a joiner started with
        `--steps 0` keeps a constant lr while the swarm it joined decays): a warning, not a
        refusal, as a peer may mean it; it says which flag follows the swarm."""
        schedule = getattr(self.trainer, "lr_schedule", None)
        if schedule is None:
            return
        text = lr_mismatch(schedule, [m.meta.get("lr") for m in self.membership.live_peers()])
        if text:
            log.warning("%s", text)

    def _refuse_other_data(self) -> None:
        """The live members train on data of another fingerprint (node/train/data/
        fingerprint.py) and none on ours: mixing our models would ruin both, as another model
        would (a JoinError, exit 2, as for that). Members of a release without the
        fingerprint say nothing and are not counted."""
        theirs = {m.meta.get("data") for m in self.membership.live_peers() if m.meta.get("data")}
        if self.data_print is None or not theirs or self.data_print in theirs:
            return
        raise JoinError(
            f"the swarm trains on other data: its members' data fingerprint is "
            f"{' or '.join(sorted(map(str, theirs)))}, this peer's is {self.data_print} "
            f"({self.data.describe()}); start it with the swarm's --data"
        )

    def _check_swarm(self) -> None:
        """Once joined: the others can dial us (ConfigError, exit 2, if not), and say so if a
        live member trains on our shard too (`--shard auto` raced another joiner)."""
        live = self.membership.live_peers()
        check_reachable(self.addr, [m.addr for m in live], "a member")
        clash = shard_clash(self.cfg.shard, live)
        if clash:
            log.warning(
                "shard %s is also trained by %s: give one of them another --shard",
                self.shard,
                ", ".join(clash),
            )

    async def _start_training(self) -> None:
        """First evaluation (the start model's accuracy), the training thread, the loops."""
        await asyncio.to_thread(self.worker.evaluate_now)
        self.worker.start()
        self.state = "alive"
        self._spawn(self._exchange_loop(), "exchange")
        self._spawn(meta_loop(self.worker, self.membership), "meta")
        self._spawn(self._watch_worker(), "watch-worker")
        self._spawn(self.byzantine.run(), "byzantine-views")
        self._spawn(probe_loop(self), "events")
        if self.cfg.join:
            alive = lambda: self.state == "alive"  # noqa: E731 - a failed peer left on purpose
            self._spawn(rejoin_loop(self.membership, self.cfg.join, alive), "rejoin")

    def _build_trainer(self) -> tuple[Any, Any, Any]:
        trainer, data, backend = build_trainer(self.cfg)
        self.data_print = data_fingerprint(data)  # in our member meta: a joiner compares it
        self.init_params = shared_start(trainer, self.cfg.exchange.compress)
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
            on_done=threadsafe_setter(self._worker_done),
        )
        worker.set_throttle(slowdown=cfg.slowdown, step_s=cfg.step_time)  # 1, 0: full speed
        worker.lr_scale = SwarmLR(cfg.lr_rule, cfg.lr_scale_max, cfg.lr_warmup)
        return worker

    def request_stop(self) -> None:
        """Ask the peer to leave (signal-handler safe: only sets a flag)."""
        self._stop.set()

    async def wait(self) -> None:
        """Until a stop is requested, or the step budget is spent."""
        await self._stop.wait()

    async def training_ended(self) -> None:
        """Until the training thread has ended: its step budget, a stop, or an error
        (`worker.error`); a failed peer lingers in the swarm after this (see `_fail`)."""
        await self._worker_done.wait()

    async def close(self) -> None:
        """Leave the swarm, stop every owned task and the training thread, checkpoint, unbind.

        Bounded by CLOSE_BUDGET_S: a training step that is still running when the budget is
        spent is abandoned (the thread is a daemon) and the newest periodic checkpoint stands.
        """
        if self._closed:
            return
        self._closed = True
        deadline = time.monotonic() + CLOSE_BUDGET_S
        self.state = "leaving"
        exchanger = getattr(self, "exchanger", None)
        if exchanger is not None:  # stop taking work: a leaving peer's mixes would be lost
            exchanger.stop_serving("leaving the swarm")
        worker = getattr(self, "worker", None)
        if worker is not None:
            worker.request_stop()  # the current step ends while we announce the leave
        membership = getattr(self, "membership", None)
        if membership is not None:
            await quietly(membership.leave(), LEAVE_DEADLINE_S, "leave announcement")
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        if membership is not None:
            await membership.close()
        if exchanger is not None:  # pushes answered already are mixed in (they were promised)
            await exchanger.settle()
        store = getattr(self, "store", None)
        if store is not None:  # folds accepted before we stopped serving reach the model
            await store.close()
        if worker is not None:
            await self._stop_worker(deadline - time.monotonic() - HTTP_SHUTDOWN_S)
        if self.watch is not None:  # its streams never end by themselves
            await self.watch.close()
        if self._runner is not None:
            await self._runner.cleanup()
        links = getattr(self, "links", None)
        if links is not None:  # the whole stack, down to the HTTP pool
            await links.close()

    async def _stop_worker(self, budget: float) -> None:
        """Wait up to `budget` s for the training thread, then save the final checkpoint."""
        try:  # join(0): never started, or already ended (then the event may not be set)
            if not self.worker.join(0):
                await asyncio.wait_for(self._worker_done.wait(), max(0.05, budget))
        except asyncio.TimeoutError:
            log.warning(
                "the training step in progress did not end within the shutdown budget: "
                "exiting without a final checkpoint (the newest periodic one stands)"
            )
            return
        self.worker_stopped = True
        if self.cfg.checkpoint_dir is not None and self.trainer.step_count > 0:
            await asyncio.to_thread(self._save_checkpoint, None)

    # --- background tasks ----------------------------------------------------------------

    def _spawn(self, coro: Any, name: str) -> None:
        task = asyncio.create_task(coro, name=f"{self.peer_id}:{name}")
        self._tasks.add(task)
        task.add_done_callback(self._task_ended)

    def _task_ended(self, task: asyncio.Task[Any]) -> None:
        """An owned task that dies of an exception is a bug: say so at once and stop the peer,
        rather than keep running without exchange or progress until someone notices."""
        if task.cancelled() or task.exception() is None:
            return
        exc = task.exception()
        log.error("task %s crashed; stopping the peer", task.get_name(), exc_info=exc)
        if self.crashed is None:
            self.crashed = exc
        self._stop.set()

    async def _exchange_loop(self) -> None:
        """A round every `sync_every` steps, or as soon after as the previous round allows
        (`sync_every` is a minimum). Bounded staleness: after each round, failed ones included,
        the worker may take at most `max_lead x sync_every` more steps before the next round
        ends, and waits otherwise (`TrainingWorker.set_step_limit`); so a peer faster than its
        network waits for it rather than trains alone, and says so in its `utilization`. A
        failed round counts as done, so a dead or partitioned partner costs one round's
        deadline, never a frozen peer; alone (no live peer), a peer never waits."""
        every = self.cfg.exchange.sync_every
        lead = math.ceil(self.cfg.max_lead * every)  # validated: 0 or >= every
        target = self.trainer.step_count + every
        reached = asyncio.Event()
        wake = threadsafe_setter(reached)
        last_end: int | None = None  # the step at which the previous round (in a swarm) ended
        while self.worker.running:
            live = self.membership.live_peers()
            self.worker.lr_scale.set_size(len(live) + 1)  # elastic
            if not live and not self._partners_late():
                self.worker.set_step_limit(None)  # nobody to wait for
                last_end = None
            elif last_end is None and lead:  # bounded from the start, not from a first round
                self.worker.set_step_limit(self.trainer.step_count + lead)  # >= target
                last_end = self.trainer.step_count
            reached.clear()
            self.worker.notify_at(target, wake)
            if self.trainer.step_count < target:
                with contextlib.suppress(asyncio.TimeoutError):
                    await asyncio.wait_for(reached.wait(), STEP_POLL_S)
                continue
            if not live and last_end is not None:
                # Partners only suspect (late heartbeats, a busy host): hold at the limit until
                # one answers again or is declared dead, rather than train alone meanwhile.
                # The target stays (it must not pass the limit: the loop would wait for it).
                await asyncio.sleep(LATE_POLL_S)
                continue
            if live:
                result = await self.exchanger.round()
                if self.on_exchange is not None:
                    self.on_exchange(result)
                end = self.trainer.step_count
                if last_end is not None:  # what the bound holds: steps from round to round
                    self.max_steps_between_rounds = max(
                        self.max_steps_between_rounds, end - last_end
                    )
                last_end = end
                if lead:  # the next round starts at most `every` steps on: below the limit
                    self.worker.set_step_limit(end + lead)
            target = max(target + every, self.trainer.step_count + 1)

    def _partners_late(self) -> bool:
        """Some other member is suspect: most likely alive with its heartbeat late (a busy
        host), and declared dead within seconds if not. Alone at full speed, a peer takes
        hundreds of steps in a second: on a loaded box one of 4 signal-task peers did just
        that while the others were suspect, and ended 7 points below them (dirichlet:0.5)."""
        return any(str(m.state) == "suspect" for m in self.membership.members())

    async def _watch_worker(self) -> None:
        """The step budget is spent: stop like on SIGTERM. Training failed: see `_fail`."""
        await self._worker_done.wait()  # set from the thread's end: holds no executor thread
        if self.worker.error is not None and self._in_a_swarm():
            await self._fail(self.worker.error)
            return
        if self.worker.error is not None:
            log.error("training stopped: %s", self.worker.error)
        update_meta(self.worker, self.membership)
        self._stop.set()

    def _in_a_swarm(self) -> bool:
        """Whether this peer has ever known another one. Not "has a live peer now": when a
        poisoned model diverges peer after peer, the last ones find everybody else failed
        and gone, and must still stay up to say so."""
        return bool(self.membership.members())  # every *other* peer, tombstones included

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
            "training stopped: %s; left the swarm, /v1/status reports 'failed' for %.0f s "
            "(or until SIGTERM), then exit code 2",
            error,
            FAILED_LINGER_S,
        )
        try:  # a user's model that failed may fail its evaluation too: report what we have
            await asyncio.to_thread(self.worker.evaluate_now)
        except SwarmnodeError as exc:
            log.error("evaluating the failed model: %s", exc)
        update_meta(self.worker, self.membership)
        await quietly(self.membership.leave(), LEAVE_DEADLINE_S, "leave announcement")
        # Bounded: long enough for `swarmnode status` and the other peers' operators to see
        # `failed`, not forever (it used to wait for SIGTERM, refusing joins all the while).
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(self._stop.wait(), FAILED_LINGER_S)
        log.error("training had failed (%s); exiting after %.0f s 'failed'", error, FAILED_LINGER_S)
        self._stop.set()

    def _save_checkpoint(self, state: dict[str, Any] | None) -> None:
        state = self.worker.state() if state is None else state
        state["meta"] = run_meta(self.cfg)
        save_checkpoint(self.cfg.checkpoint_dir, state, keep=self.cfg.keep_checkpoints)

    def params_host(self) -> np.ndarray:
        return to_numpy(self.trainer.model.params.data)


__all__ = ["JoinError", "Node"]
