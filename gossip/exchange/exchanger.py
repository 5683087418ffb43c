"""Parameter exchange between peers: asynchronous pairwise averaging and robust pull-aggregate.

The protocols deal in flat float32 vectors only; the model lives behind `ParamStore` (the node's
training worker), the peers behind `PeerDirectory` (membership) and the wire behind `Transport`.

- `average` (group push-pull, gossip/exchange/average_round.py): push my snapshot to `group`
  random live peers at once and take the mean of all, landed by the delta rule. Neither side
  ever waits on the other's exchange, so two peers choosing each other at once cannot deadlock:
  a handler only snapshots, answers, and queues a mix for its training thread.
- `robust`: (push-)pull `pull` peers at once; a robust rule (`ss-clip`) on {own} U {received}.

Each mode is a round object (a `Round`: `AverageRound`, `RobustRound`), picked once at
construction: it runs my own rounds, gathering models through the exchanger (`RoundIO`:
push-pull, pull, outer step), and judges and mixes the models pushed to me (`take_push`). The
exchanger serves, counts and frames; it never asks which mode it is in.

After its own round (either mode) a peer asks its store for an *outer step* (`outer_lr`,
`outer_momentum`): DiLoCo-style Nesterov momentum on the mixed model's progress since its last
round (see `node.train.mixing.mixes.OuterStep`; docs/exchange.md has the formula,
docs/benchmarks.md the measurements).

Training never stops for an exchange: snapshots and mixes happen between two steps (`mix_in`
returns once queued); every request has a deadline; large vectors are coded and aggregated in
worker threads. A round never raises for a peer's failure or a `SwarmnodeError` of its own: it
reports it in its `RoundResult` and the log, and the exchange loop goes on.
"""

from __future__ import annotations

import asyncio
import logging
import math
import statistics
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence

import numpy as np
from swarmnode.gossip.errors import (
    ExchangeError,  # re-exported: the front
    RemoteError,
    TransportError,
    WireError,
)
from swarmnode.gossip.exchange import compressed as cx
from swarmnode.gossip.exchange import delta_rule
from swarmnode.gossip.exchange.access import check_named, check_pusher, check_sender
from swarmnode.gossip.exchange.average_round import AverageRound
from swarmnode.gossip.exchange.config import ExchangeConfig
from swarmnode.gossip.exchange.pushes import Pushes
from swarmnode.gossip.exchange.robust_round import RobustRound
from swarmnode.gossip.exchange.round_log import describe, join_notes
from swarmnode.gossip.exchange.slots import BulkSlot, PushMixes
from swarmnode.gossip.exchange.types import (
    NO_PEER,
    Outgoing,
    ParamStore,
    PeerDirectory,
    Round,
    RoundResult,
)
from swarmnode.gossip.link import (
    BULK,
    Arrival,
    Early,
    Handler,
    MeasuringTransport,
    Transport,
    takes_arriving,
)
from swarmnode.gossip.robust import PushBudget, PushGuard
from swarmnode.gossip.wire import (
    FrameHeader,
    decode_control,
    decode_params,
    encode_control,
    read_header,
    validate_params,
)
from swarmnode.kernels.errors import SwarmnodeError

log = logging.getLogger(__name__)

# A round whose proven partners (they answered before) have answered waits this much longer for
# the others, then goes on without them (`_answers`): x the time the proven ones took, at least
GRACE_FACTOR = 1.0
GRACE_MIN_S = 0.05
# The quorum grace (`_answers`, any partner): once ceil(group / 2) partners answered, the rest
# get QUORUM_FACTOR x the median answer time so far, at least QUORUM_MIN_S, then the round lands
# without them: one slow member of a group costs the others about one grace, not its answer
# time, and the step limit does not then hold the whole swarm behind it
QUORUM_FACTOR = 2.0
QUORUM_MIN_S = 0.1
MAX_ANSWERED = 4096  # partners remembered as having answered (the table holds at most 1,024)
# `mode` -> its round object (`ExchangeConfig.validate` admits these modes only)
ROUNDS: dict[str, type[AverageRound] | type[RobustRound]] = {
    "average": AverageRound,
    "robust": RobustRound,
}


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
        # bounds every pushed model, in both modes (gossip/robust/push_guard.py), and what one
        # sender's pushes may do in all: a rate and a travel cap (gossip/robust/push_budget.py)
        self.guard = PushGuard(anchored=cfg.push_budget)
        self.budget = PushBudget()
        self.pushes = Pushes(store, self.guard, self.budget)
        self._answered: OrderedDict[str, None] = OrderedDict()  # partners that answered lately
        # outbound-only partners my round drew: the next model each pushes is its answer
        # (gossip/exchange/outbound.py)
        self._awaited: dict[str, asyncio.Future[np.ndarray]] = {}
        # a partner late again and again is sampled less (gossip/link/backoff.py, `late`)
        self._backoff = transport.backoff if isinstance(transport, MeasuringTransport) else None
        self.pull_codec = cx.pull_codec(cfg.compress)  # whole models: fp16/int8, or raw (None)
        self.compression = cx.build(cfg, self_id, store, transport, self._decode, init, segs)
        # my mode, whole: my own rounds and how a push to me is judged and mixed
        self.mode_round: Round = ROUNDS[self.cfg.mode](
            self.cfg, store, peers, self, self.pushes, self.compression
        )

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
            reply = await self._encode_mine(msg, to=str(msg.get("sender")))
            self.bytes_sent += len(reply)
            return reply

    @takes_arriving
    async def _handle_pushpull(self, req: Arrival) -> bytes | Early:
        if req.arriving is not None:  # its envelope's head is verified, its body still arrives
            return await self._pushpull_early(req)
        body = req.body
        self._check_serving()
        # the frame's header, read once: who sent it, which codec, then its decoding
        header = self._pushed_header(body)
        check_pusher(self.peers, header, req.signed_by)  # a member, in its own name (access.py)
        async with self._bulk_slot():
            if (reply := await self.compression.serve_if_compressed(body, header)) is not None:
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
                self._decode(body, source="pushpull request", quiet=True, header=header),
                self._encode_mine(to=header.sender),
                return_exceptions=True,
            )
            for outcome in (decoded, encoded):
                if isinstance(outcome, BaseException):
                    raise outcome
            _, theirs = decoded  # type: ignore[misc]
            reply = encoded
            if (awaited := self._awaited.pop(header.sender, None)) is not None:
                # my round drew it (outbound-only): its answer too, in a copy of its own (a round
                # writes over its answers); as a dialled partner's model reaches me both ways
                answer = await asyncio.to_thread(np.copy, theirs)
                if not awaited.done():
                    awaited.set_result(answer)
            mix = self.mode_round.take_push(theirs, header.sender)
            if self.mix_after_answer:  # while the answer is sent (the snapshot is taken already)
                self._mixing.start(mix)
            else:
                await mix
            self.served += 1
            self.bytes_sent += len(reply)
            log.debug(
                "pushpull from %s: answered, mix under way (their step %s)",
                header.sender,
                header.step,
            )
            return reply

    async def _pushpull_early(self, req: Arrival) -> bytes | Early:
        """A push-pull answered while the push still arrives: my model goes out to the member
        whose signature the envelope's head carries (the frame I would send it anyway, so
        nothing leaks to a non-member), snapshot first; the push itself is judged, decoded and
        mixed only once its body verified (`_take_streamed`), and the answer's last bytes wait
        for that. A compressed exchange answers from the push's content: it waits for it."""
        self._check_serving()
        if not isinstance(self.compression, cx.Uncompressed) or not req.signed_by:
            assert req.arriving is not None
            body = await req.arriving
            return await self._handle_pushpull(req.opened(body, req.signed_by))
        check_sender(self.peers, req.signed_by, "pushpull", req.signed_by)
        if self._inflight.locked():
            raise RemoteError("busy: too many exchanges in flight, try another peer", status=503)
        await self._inflight.acquire()  # held until the push is mixed or refused
        try:
            await self._mixing.room()  # each mix in progress holds a received model
            reply = await self._encode_mine(to=req.signed_by)
        except BaseException:
            self._inflight.release()
            raise
        return Early(reply, asyncio.ensure_future(self._take_streamed(req, len(reply))))

    async def _take_streamed(self, req: Arrival, reply_bytes: int) -> None:
        """The push of an early answer, once its body is whole and verified: the same checks,
        decoding and mix as `_handle_pushpull`'s; any refusal cuts the answer off."""
        try:
            assert req.arriving is not None
            body = await req.arriving
            header = self._pushed_header(body)
            check_named(header, req.signed_by)  # checked live at its head already
            await self.compression.serve_if_compressed(body, header)  # a compressed one: 400
            _, theirs = await self._decode(
                body, source="pushpull request", quiet=True, header=header
            )
            mix = self.mode_round.take_push(theirs, header.sender)
            if self.mix_after_answer:  # while the answer's last bytes go out
                self._mixing.start(mix)
            else:
                await mix
            self.served += 1
            self.bytes_sent += reply_bytes
            log.debug("pushpull from %s: answered early, mix under way", header.sender)
        finally:
            self._inflight.release()

    def _pushed_header(self, body: bytes) -> FrameHeader:
        """A pushed frame's header, the one read of it per push (access, codec, answer, decode
        all take this one). One that does not parse is refused here, before it takes a slot,
        and counted (the HTTP layer logs the refusal with the caller's address)."""
        try:
            return read_header(body)
        except WireError:
            self.rejected += 1
            raise

    def distrust(self, senders: set[str]) -> None:
        """Mix nothing these peers push for a while (a mix of theirs was rolled back as a
        collapse: node/train/mixing/collapse.py)."""
        for sender in senders:
            self.budget.distrust(sender)

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
        self.budget.own_round()  # every sender earns a push (gossip/robust/push_budget.py)
        result = RoundResult(self.cfg.mode)
        failed = False
        # before my snapshot: while my round is in flight, each push mixed in counts what it moved
        pushed_in = delta_rule.Moved() if self.cfg.delta_rule else None
        self.pushes.in_flight = pushed_in
        try:
            await self.mode_round.run(result, pushed_in)
        except SwarmnodeError as exc:
            failed = True
            result.note = join_notes(result.note, f"round failed: {type(exc).__name__}: {exc}")
        finally:
            self.pushes.in_flight = None
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
        self,
        picked: Sequence[tuple[str, str]],
        result: RoundResult,
        awaited: Sequence[str] = (),
    ) -> tuple[list[np.ndarray], np.ndarray]:
        """Push my model to every picked peer at once: their answers (failures recorded), and
        my model as it was when pushed (before any codec). `awaited`: outbound-only members
        drawn beside them, not dialled: the model each pushes to me meanwhile is its answer
        (and is mixed as a push besides, as a dialled partner's own pushes are)."""
        payload, sent = await self._encode_with_base()
        if sent is None:
            sent = await asyncio.to_thread(delta_rule.own_frame_params, payload)
        payloads = [payload] * len(picked)
        if self._poisoning_now():  # a liar may craft each push for its recipient (fault/)
            payloads = [(await self._encode_with_base(to=pid))[0] for pid, _ in picked]
        tasks = [
            asyncio.ensure_future(self._pushpull(pid, addr, body))
            for (pid, addr), body in zip(picked, payloads, strict=True)
        ]
        waits = [self._await_push(pid) for pid in awaited]
        # an awaited member pushed lately: as proven as a partner that answered before
        relied = [t for (pid, _), t in zip(picked, tasks, strict=True) if pid in self._answered]
        try:
            answers = await _answers(tasks + waits, relied + waits, self.cfg.push_budget)
        finally:
            for pid in awaited:
                if (f := self._awaited.get(pid)) is not None and f.done():
                    del self._awaited[pid]
        # a late answer is dropped, not mixed when it comes: it answers my push with its model
        # from before mixing mine, which my model, moved on by then, must not average with
        # again; its mix of my push still happens on its side if it got the push
        got = [a for _, a in self._settle(picked, answers[: len(picked)], result)]
        for pid, outcome in zip(awaited, answers[len(picked) :], strict=True):
            if isinstance(outcome, np.ndarray):
                result.received.append(pid)
                got.append(outcome)
            elif isinstance(outcome, (asyncio.CancelledError, TimeoutError)):
                result.failures[pid] = "outbound-only: no push within the grace"
            elif isinstance(outcome, BaseException):
                raise outcome
        return got, sent

    async def pull_group(
        self, picked: Sequence[tuple[str, str]], result: RoundResult
    ) -> list[tuple[str, int, np.ndarray]]:
        """(peer_id, step, parameters) of the picked peers, pulled at once with a group
        round's quorum and grace (`_answers`): a partner still out after the grace is dropped
        (recorded in `result`) and sampled less, as in `pushpull_many`."""
        tasks = [asyncio.ensure_future(self.pull(pid, addr)) for pid, addr in picked]
        relied = [t for (pid, _), t in zip(picked, tasks, strict=True) if pid in self._answered]
        answers = await _answers(tasks, relied, self.cfg.push_budget)
        return [(pid, *got) for pid, got in self._settle(picked, answers, result)]

    def _settle(
        self, picked: Sequence[tuple[str, str]], answers: list[object], result: RoundResult
    ) -> list[tuple[str, object]]:
        """(peer id, answer) of the partners that answered in time; the others' failures
        recorded, the late ones backed off (slow, not gone), the prompt ones remembered."""
        got = []
        for (pid, addr), outcome in zip(picked, answers, strict=True):
            if isinstance(outcome, asyncio.CancelledError):
                result.failures[pid] = "no answer within the grace after the others'"
                if pid in self._answered and self._backoff is not None:  # slow, not gone
                    self._backoff.late(addr, BULK)
            elif isinstance(outcome, (TransportError, SwarmnodeError)):
                result.failures[pid] = str(outcome)
                self._answered.pop(pid, None)
            elif isinstance(outcome, BaseException):
                raise outcome  # a bug, not a peer's failure
            else:
                result.received.append(pid)
                got.append((pid, outcome))
                if self._backoff is not None:
                    self._backoff.on_time(addr, BULK)
                self._answered.pop(pid, None)
                self._answered[pid] = None
                if len(self._answered) > MAX_ANSWERED:
                    del self._answered[next(iter(self._answered))]
        return got

    def _await_push(self, peer_id: str) -> asyncio.Future[np.ndarray]:
        """The next model `peer_id` pushes to me, within the exchange deadline (its handler
        sets it: `_handle_pushpull`); cancelled with the round's grace."""
        future: asyncio.Future[np.ndarray] = asyncio.get_running_loop().create_future()
        if (old := self._awaited.get(peer_id)) is not None:
            old.cancel()
        self._awaited[peer_id] = future
        return asyncio.ensure_future(asyncio.wait_for(future, self.cfg.timeout))

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

    def _poisoning_now(self) -> bool:
        """Whether `outgoing` may change my model right now (a byzantine peer's)."""
        return self.outgoing is not None and (self.poisoning is None or self.poisoning())

    def _framed_honestly(self) -> bool:
        """Whether my model goes out as the store's raw frame of it, unchanged."""
        return not self._poisoning_now() and self.pull_codec is None

    async def _encode_mine(self, pull: dict | None = None, to: str = "") -> bytes:
        return (await self._encode_with_base(pull, to))[0]

    async def _encode_with_base(
        self, pull: dict | None = None, to: str = ""
    ) -> tuple[bytes, np.ndarray | None]:
        """My model framed (for peer `to`, "" unknown), and the snapshot it came from; None for
        the store's raw frame (the one-copy path: its payload is that snapshot,
        `delta_rule.own_frame_params`)."""
        if self._framed_honestly():
            return await self.store.snapshot_frame(self.self_id), None
        step, vec = await self.store.snapshot()
        out = vec if self.outgoing is None else await self.outgoing(step, vec, to)
        if pull and (reply := await self.compression.serve_pull(pull, step, out)):
            return reply, vec
        return await asyncio.to_thread(
            cx.encode_model, out, self.pull_codec, self.self_id, step
        ), vec

    async def _decode(
        self,
        data: bytes,
        *,
        source: str,
        quiet: bool = False,
        sparse: bool = False,  # a tk16 frame as a compress.Sparse (gossip.exchange.refs)
        header: FrameHeader | None = None,  # the frame's, read already: not read again
    ) -> tuple[dict, np.ndarray]:
        try:
            args = (data, self.store.size, sparse, header)
            return await asyncio.to_thread(_decode_checked, *args)
        except SwarmnodeError as exc:
            self.rejected += 1
            if not quiet:
                log.warning("rejected %s: %s", source, exc)
            raise


async def _answers(
    tasks: list[asyncio.Future[np.ndarray]],
    relied: list[asyncio.Future[np.ndarray]],
    cut: bool,
    clock: Callable[[], float] = time.perf_counter,
) -> list[object]:
    """Every task's outcome (an exception, `CancelledError` for one cut). The round goes on
    without the partners still out once either grace has passed, and they are cancelled:

    - the quorum grace (always): once ceil(n / 2) partners answered, the rest get
      `quorum_grace` of the answer times so far (a slow member costs about one grace);
    - with `cut` and some partners that answered before (`relied`) among others, once those
      have, the others get `GRACE_FACTOR` x the time that took (at least `GRACE_MIN_S`), so a
      newcomer that never answers (a silent sybil) costs about one round's time, not its
      deadline.

    Cancelled itself (a peer closing mid-round), it ends its tasks first: `asyncio.wait`
    leaves them running, and they would outlive the round, the store and the HTTP pool."""
    try:
        await _wait_out_graces(tasks, relied, cut, clock)
    finally:
        for t in tasks:  # the ones still out; a finished task ignores it
            t.cancel()
        outcomes = await asyncio.gather(*tasks, return_exceptions=True)
    return list(outcomes)


async def _wait_out_graces(
    tasks: list[asyncio.Future[np.ndarray]],
    relied: list[asyncio.Future[np.ndarray]],
    cut: bool,
    clock: Callable[[], float],
) -> None:
    """Until every task is done or the grace in force has passed (`_answers`)."""
    t0 = clock()
    pending: set[asyncio.Future[np.ndarray]] = set(tasks)
    times: list[float] = []
    waiting_relied = set(relied) if cut and relied and len(relied) < len(tasks) else set()
    quorum = math.ceil(len(tasks) / 2)
    until: float | None = None  # when the grace in force ends
    while pending:
        timeout = None if until is None else max(0.0, until - clock())
        done, pending = await asyncio.wait(
            pending, timeout=timeout, return_when=asyncio.FIRST_COMPLETED
        )
        if not done:
            break  # the grace passed
        now = clock()
        times += [now - t0 for t in done if not t.cancelled() and t.exception() is None]
        if len(times) >= quorum and pending:
            until = _sooner(until, now + quorum_grace(times))
        if waiting_relied:
            waiting_relied -= done
            if not waiting_relied and pending:
                until = _sooner(until, now + max(GRACE_MIN_S, GRACE_FACTOR * (now - t0)))


def quorum_grace(answer_times: Sequence[float]) -> float:
    """How long the partners still out are waited for once a quorum answered: `QUORUM_FACTOR`
    x the median answer time so far, at least `QUORUM_MIN_S`."""
    return max(QUORUM_MIN_S, QUORUM_FACTOR * statistics.median(answer_times))


def _sooner(a: float | None, b: float) -> float:
    return b if a is None else min(a, b)


def _decode_checked(
    data: bytes, size: int, sparse: bool = False, header: FrameHeader | None = None
) -> tuple[dict, np.ndarray]:
    fields, vec = decode_params(data, expected_size=size, sparse=sparse, header=header)
    validate_params(vec, size)
    return fields, vec


__all__ = [
    "ExchangeConfig",
    "ExchangeError",
    "Exchanger",
    "ParamStore",
    "PeerDirectory",
    "RoundResult",
]
