"""Parameter exchange between peers: asynchronous pairwise averaging and robust pull-aggregate.

The protocols deal in flat float32 vectors only; the model lives behind `ParamStore` (the node's
training worker), the peers behind `PeerDirectory` (membership) and the wire behind `Transport`.

- `average` (group push-pull, gossip/exchange/average_round.py): push my snapshot to `group`
  random live peers at once and take the mean of all, landed by the delta rule. Neither side
  ever waits on the other's exchange, so two peers choosing each other at once cannot deadlock:
  a handler only snapshots, answers, and queues a mix for its training thread.
- `robust`: (push-)pull `pull` peers at once; a robust rule (`ss-clip`) on {own} U {received}.

Each mode is a round object (`AverageRound`, `RobustRound`) that gathers models through the
exchanger (`RoundIO`: push-pull, pull, outer step) and lands them in the store.

After its own round (either mode) a peer asks its store for an *outer step* (`outer_lr`,
`outer_momentum`): DiLoCo-style Nesterov momentum on the mixed model's progress since its last
round (see `node.train.mixes.OuterStep` and docs/architecture.md for the formula and the measurements).

Training never stops for an exchange: snapshots and mixes happen between two steps (`mix_in`
returns once queued); every request has a deadline; large vectors are coded and aggregated in
worker threads. A round never raises for a peer's failure or a `SwarmnodeError` of its own: it
reports it in its `RoundResult` and the log, and the exchange loop goes on.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Sequence

import numpy as np
from swarmnode.gossip.errors import (
    ExchangeError,  # re-exported: the front
    RemoteError,
    TransportError,
)
from swarmnode.gossip.exchange import compressed as cx
from swarmnode.gossip.exchange import delta_rule
from swarmnode.gossip.exchange.access import check_pusher, check_sender
from swarmnode.gossip.exchange.average_round import AverageRound
from swarmnode.gossip.exchange.config import ExchangeConfig
from swarmnode.gossip.exchange.robust_round import RobustRound
from swarmnode.gossip.exchange.round_log import describe, join_notes
from swarmnode.gossip.exchange.slots import BulkSlot, PushMixes
from swarmnode.gossip.exchange.types import (
    NO_PEER,
    Outgoing,
    ParamStore,
    PeerDirectory,
    RoundResult,
)
from swarmnode.gossip.link.transport import Arrival, Handler, Transport
from swarmnode.gossip.robust.heading import bound_push
from swarmnode.gossip.robust.push_guard import PushGuard
from swarmnode.gossip.wire import frames as wire
from swarmnode.gossip.wire.control import decode_control, encode_control
from swarmnode.kernels.errors import SwarmnodeError

log = logging.getLogger(__name__)


class Exchanger:
    """Runs exchange rounds for one peer and serves the other peers' exchange requests."""

    def __init__(
        self,
        cfg: ExchangeConfig,
        *,
        self_id: str,
        transport: Transport,
        store: ParamStore,
        peers: PeerDirectory,
        outgoing: Outgoing | None = None,
        poisoning: Callable[[], bool] | None = None,
        init: np.ndarray | None = None,  # the initial parameters: compressed pairs start there
        segs: tuple[tuple[int, int], ...] = (),  # the model's matrices (rows, cols): lowrank
        mix_after_answer: bool = False,
    ) -> None:
        self.cfg = cfg.validate()
        self.self_id = self_id
        self.transport = transport
        self.store = store
        self.peers = peers
        self.outgoing = outgoing
        # whether `outgoing` changes anything right now (None: assume it does); an honest peer
        # then takes the one-copy framed snapshot path
        self.poisoning = poisoning
        self._inflight = asyncio.Semaphore(cfg.max_inflight)
        self.mix_after_answer = mix_after_answer  # over HTTP; in-memory: no task past a request
        self._mixing = PushMixes(cfg.max_inflight)
        self.rounds = self.rounds_applied = self.served = self.rejected = 0
        self.bytes_sent = 0  # parameter payloads this peer sent: its requests and its answers
        self.last_round_s = 0.0
        self.max_round_s = 0.0  # the longest any round made this peer wait (<= one deadline + work)
        self.refusing: str | None = None  # why this peer no longer serves its model (None: it does)
        # while my own round is in flight: how each push mixed in meanwhile moved me
        self._pushed_in: delta_rule.Moved | None = None
        # bounds every pushed model, in both modes (gossip/robust/push_guard.py)
        self.guard = PushGuard()
        self.pull_codec = cx.pull_codec(cfg.compress)  # whole models: fp16/int8, or raw (None)
        self.compression = cx.build(cfg, self_id, store, transport, self._decode, init, segs)
        self.robust = RobustRound(self.cfg, store, peers, self, self.guard)
        self.average = AverageRound(self.cfg, store, peers, self, self.compression, self.guard)

    # --- serving -------------------------------------------------------------------------

    def handlers(self) -> dict[str, Handler]:
        return {"params": self._handle_pull, "pushpull": self._handle_pushpull}

    def stop_serving(self, reason: str) -> None:
        """Answer every later exchange request with 503 `reason`: a peer whose training failed
        holds a model that would only harm the peers mixing it in."""
        self.refusing = reason

    def resume_serving(self) -> None:
        """Serve again (a joiner whose state sync is done)."""
        self.refusing = None

    async def serve_model(self) -> bytes:
        """My model as a pull is answered (the operator's read: node/peer/admin_routes.py)."""
        self._check_serving()
        return await self._encode_mine()

    def _check_serving(self) -> None:
        if self.refusing is not None:
            raise RemoteError(f"not serving parameters: {self.refusing}", status=503)

    async def _handle_pull(self, req: Arrival) -> bytes:
        msg = decode_control(req.body, "pull")
        check_sender(self.peers, msg.get("sender"), "params", req.signed_by)
        self._check_serving()
        async with self._bulk_slot():
            self.served += 1
            reply = await self._encode_mine(msg)
            self.bytes_sent += len(reply)
            return reply

    async def _handle_pushpull(self, req: Arrival) -> bytes:
        body = req.body
        self._check_serving()
        check_pusher(
            self.peers, body, req.signed_by
        )  # a live member, in its own name (exchange/access.py)
        async with self._bulk_slot():
            if (reply := await self.compression.serve_if_compressed(body)) is not None:
                self.served += 1
                self.bytes_sent += len(reply)
                return reply
            await self._mixing.room()  # each mix in progress holds a received model
            # Check theirs and encode ours at once (two threads; hashing and copying release the
            # GIL): each is ~10-20 ms per 100 MB on the critical path of the caller's round.
            # Both finish before the mix is queued: were the mix queued first, a training step
            # could apply it before the snapshot, and the caller would get its own model back
            # inside ours (both sides must mix the other's pre-exchange values).
            # Inbound: the HTTP layer logs a rejection with the caller's address; count it only.
            decoded, encoded = await asyncio.gather(
                self._decode(body, source="pushpull request", quiet=True),
                self._encode_mine(),
                return_exceptions=True,
            )
            for outcome in (decoded, encoded):
                if isinstance(outcome, BaseException):
                    raise outcome
            header, theirs = decoded  # type: ignore[misc]
            reply = encoded
            mix = self._mix_clipped(theirs, str(header.get("sender")))
            if self.mix_after_answer:  # while the answer is sent (the snapshot is taken already)
                self._mixing.start(mix)
            else:
                await mix
            self.served += 1
            self.bytes_sent += len(reply)
            log.debug(
                "pushpull from %s: answered, mix under way (their step %s)",
                header.get("sender"),
                header.get("step"),
            )
            return reply

    async def _mix_clipped(self, theirs: np.ndarray, sender: str) -> None:
        """Both modes mix a pushed model in only as own + clip(theirs - own, tau) (ClippedGossip,
        He et al. 2022), tau from my own rounds (gossip/robust/push_guard.py): a liar moves me by at
        most tau x weight per push. `own` is my model now, not the snapshot the answer
        carried: the radius was tuned on distances to the current model (with the answer's
        snapshot the worst of 4 iid peers on the signal task fell from ~78% to 75-77%)."""
        if self.cfg.mode == "average" and await self._mix_measured(theirs, sender):
            return
        await self._mix_from_snapshot(theirs, sender)

    async def _mix_measured(self, theirs: np.ndarray, sender: str) -> bool:
        """The average mode's usual push, judged by its distance to my model (read in place,
        `ParamStore.distance`: no snapshot of it) and mixed as it came, or refused; False
        where the bound needs my model itself (a clip, or my own round in flight: the delta
        rule counts what each push moved)."""
        tau = self.guard.radius()
        if tau is None:
            tau = self.guard.radius_of_norm(await self.store.norm())
        verdict = self.guard.judge(await self.store.distance(theirs), tau, sender)
        if verdict == "clip" or (verdict == "mix" and self._pushed_in is not None):
            return False
        if verdict == "mix":  # no await since `_pushed_in` was read: no round started since
            await self.store.mix_in(theirs, self.cfg.mix)
        return True

    async def _mix_from_snapshot(self, theirs: np.ndarray, sender: str) -> None:
        robust = self.cfg.mode == "robust"
        _, own = await self.store.snapshot()
        tau = (
            self.robust.clip_tau if robust else self.guard.radius() or self.guard.first_radius(own)
        )
        back = self.robust.back if robust else None
        args = (own, theirs, tau, back, self.cfg.backward_limit, sender)
        clipped = await asyncio.to_thread(bound_push, self.guard, *args)  # heading cut: robust
        if clipped is None:
            return
        # robust: 1 / (pull + 1), the weight each model has in my own round: a peer is pushed to
        # about `pull` times per round of its own, and a liar pushing at every round of its own
        # must not get more say than in an aggregate (at 1/2 an ALIE liar took the swarm to 21%)
        weight = 1.0 / (self.cfg.pull + 1) if robust else self.cfg.mix
        if (moved := self._pushed_in) is not None:  # my own round is in flight: `delta_rule.land`
            await asyncio.to_thread(moved.add, clipped, own, weight)
        await self.store.mix_in(clipped, weight)

    def _bulk_slot(self) -> BulkSlot:
        return BulkSlot(self._inflight)

    async def settle(self) -> None:
        """Until every pushed model answered so far is mixed in (queued into the store)."""
        await self._mixing.settle()

    # --- initiating ----------------------------------------------------------------------

    async def round(self) -> RoundResult:
        """One exchange in the configured mode.

        Never raises for a peer's failure, nor for a `SwarmnodeError` raised inside the round
        (e.g. `AggregationError` when too few finite models remain): that one is recorded in
        `result.note`, logged at WARNING, and the round ends unapplied, so the exchange loop
        that calls this goes on. Anything else is a bug and propagates.
        """
        t0 = time.perf_counter()
        result = RoundResult(self.cfg.mode)
        run = self.average.run if self.cfg.mode == "average" else self.robust.run
        failed = False
        self._pushed_in = delta_rule.Moved() if self.cfg.delta_rule else None  # before my snapshot
        try:
            await run(result, self._pushed_in)
        except SwarmnodeError as exc:
            failed = True
            result.note = join_notes(result.note, f"round failed: {type(exc).__name__}: {exc}")
        finally:
            self._pushed_in = None
        result.duration_s = time.perf_counter() - t0
        self.last_round_s = result.duration_s
        self.max_round_s = max(self.max_round_s, result.duration_s)
        self.rounds += 1
        self.rounds_applied += result.applied
        # one line a round: WARNING if it failed, INFO with a note (a robust round skipped or
        # with a smaller f), DEBUG otherwise (a partner's 503 or absence is routine)
        routine = not result.note or result.note == NO_PEER
        level = logging.WARNING if failed else logging.DEBUG if routine else logging.INFO
        log.log(level, "exchange round: %s", describe(result))
        return result

    # --- RoundIO: what the round objects ask of the exchanger ----------------------------

    def count_sent(self, nbytes: int) -> None:
        self.bytes_sent += nbytes

    async def pushpull_many(
        self, picked: Sequence[tuple[str, str]], result: RoundResult
    ) -> tuple[list[np.ndarray], np.ndarray]:
        """Push my model to every picked peer at once: their answers (failures recorded), and
        my model as it was when pushed (before any codec)."""
        payload, sent = await self._encode_with_base()
        if sent is None:
            sent = await asyncio.to_thread(delta_rule.own_frame_params, payload)
        answers = await asyncio.gather(
            *(self._pushpull(pid, addr, payload) for pid, addr in picked), return_exceptions=True
        )
        got = []
        for (pid, _), outcome in zip(picked, answers, strict=True):
            if isinstance(outcome, (TransportError, SwarmnodeError)):
                result.failures[pid] = str(outcome)
            elif isinstance(outcome, BaseException):
                raise outcome  # a bug, not a peer's failure
            else:
                result.received.append(pid)
                got.append(outcome)
        return got, sent

    async def _pushpull(self, peer_id: str, addr: str, payload: bytes) -> np.ndarray:
        answer = await self.transport.request(addr, "pushpull", payload, timeout=self.cfg.timeout)
        self.bytes_sent += len(payload)
        _, theirs = await self._decode(answer, source=f"pushpull answer from {peer_id}")
        return theirs

    async def outer_step(self) -> None:
        """Queue the outer step after this round's mix (a no-op at lr 1, momentum 0)."""
        cfg = self.cfg
        if cfg.outer_lr != 1.0 or cfg.outer_momentum != 0.0:
            await self.store.outer_step(cfg.outer_lr, cfg.outer_momentum)

    async def pull(
        self, peer_id: str, addr: str, timeout: float | None = None
    ) -> tuple[int, np.ndarray]:
        """(step, parameters) of one peer, validated; raises TransportError / WireError.
        `timeout`: the deadline if not the exchange's (a joiner's state sync may wait longer)."""
        body = encode_control("pull", sender=self.self_id, **self.compression.pull_fields())
        answer = await self.transport.request(
            addr, "params", body, timeout=timeout or self.cfg.timeout
        )
        header, vec = await self._decode(answer, source=f"params from {peer_id}")
        vec = await self.compression.from_pull(peer_id, header, vec)  # maybe on x0: add it
        return int(header.get("step", 0)), vec

    async def pull_many(
        self,
        picked: Sequence[tuple[str, str]],
        failures: dict[str, str] | None = None,
        timeout: float | None = None,
    ) -> list[tuple[str, int, np.ndarray]]:
        """(peer_id, step, parameters) from several peers in parallel; failures are recorded."""
        outcomes = await asyncio.gather(
            *(self.pull(pid, addr, timeout) for pid, addr in picked), return_exceptions=True
        )
        models = []
        for (pid, _), outcome in zip(picked, outcomes, strict=True):
            if isinstance(outcome, SwarmnodeError):
                if failures is not None:
                    failures[pid] = str(outcome)
            elif isinstance(outcome, BaseException):
                raise outcome  # a bug, not a peer's failure
            else:
                models.append((pid, *outcome))
        return models

    # --- encoding ------------------------------------------------------------------------

    def _framed_honestly(self) -> bool:
        """Whether my model goes out as the store's raw frame of it, unchanged."""
        honest = self.outgoing is None or (self.poisoning is not None and not self.poisoning())
        return honest and self.pull_codec is None

    async def _encode_mine(self, pull: dict | None = None) -> bytes:
        return (await self._encode_with_base(pull))[0]

    async def _encode_with_base(self, pull: dict | None = None) -> tuple[bytes, np.ndarray | None]:
        """My model framed, and the snapshot it came from; None for the store's raw frame (the
        one-copy path: its payload is that snapshot, `delta_rule.own_frame_params`)."""
        if self._framed_honestly():
            return await self.store.snapshot_frame(self.self_id), None
        step, vec = await self.store.snapshot()
        out = vec if self.outgoing is None else await self.outgoing(step, vec)
        if pull and (reply := await self.compression.serve_pull(pull, step, out)):
            return reply, vec
        return await asyncio.to_thread(
            cx.encode_model, out, self.pull_codec, self.self_id, step
        ), vec

    async def _decode(
        self, data: bytes, *, source: str, quiet: bool = False, sparse: bool = False
    ) -> tuple[
        dict, np.ndarray
    ]:  # sparse: a tk16 frame as a compress.Sparse (gossip.exchange.refs)
        try:
            return await asyncio.to_thread(_decode_checked, data, self.store.size, sparse)
        except SwarmnodeError as exc:
            self.rejected += 1
            if not quiet:
                log.warning("rejected %s: %s", source, exc)
            raise


def _decode_checked(data: bytes, size: int, sparse: bool = False) -> tuple[dict, np.ndarray]:
    header, vec = wire.decode_params(data, expected_size=size, sparse=sparse)
    wire.validate_params(vec, size)
    return header, vec


__all__ = [
    "ExchangeConfig",
    "ExchangeError",
    "Exchanger",
    "ParamStore",
    "PeerDirectory",
    "RoundResult",
]
