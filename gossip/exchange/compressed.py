"""Compressed push-pull: the exchange's `average` mode with `compress` fp16, int8, topk, topk2
or lowrank.

Each push-pull moves compressed *differences against a reference the pair shares*
(`swarmnode.gossip.exchange.refs`: what is not sent this round is sent later) and ends with CHOCO's
gossip step on the pair's copies, x += w (x̂_partner - x̂_self), queued on the store
(`ParamStore.nudge`), both copies moved by the same step on both sides. A group round does it
with every picked partner at once (one encode per partner: each pair has its own reference) at
w = 1 / (k + 1) per pair (the weight of the uncompressed group mean; `mix` for one partner);
the request names it (`mix`) and the responder takes the same step, so both sides agree.

Negotiation: a frame with reference fields is answered in kind only by a peer that exchanges
compressed too (any codec: each side decodes every codec, sends its own). A peer exchanging
uncompressed refuses it (400 naming `compress`), and the initiator then talks to that partner
uncompressed (its plain push-pull) from then on. Admission, busy and not-serving refusals (503)
happen before anything is applied, so they keep the pair's reference; every other failure drops
what we sent that partner (the next frame is full).

One exchange per partner at a time: a push-pull from a partner whose exchange with us is in
flight is not interleaved with it, which also bounds the bytes in flight per partner to one
frame each way. Two push-pulls that cross (each side's request in flight to the other: the
rule when peers start their rounds together, as a swarm at full speed does) are settled by the
ids: the peer with the smaller id refuses the other's (423, `CROSSED`: no failure, so the
other does not back off from it), and the other answers the
smaller id's request once its own has come back refused (`_wait_turn`). Refusing both, as
before, made every crossing round fail on both sides: 4 peers with concurrent group rounds
applied 21-27 of 120 (topk2, lowrank; uncompressed 120), and a full-speed portfolio swarm
applied 4 rounds in 110 and learned no more than its shards alone.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

import numpy as np
from swarmnode.gossip.errors import CROSSED, RemoteError, TransportError, WireError
from swarmnode.gossip.exchange.refs import FULL_CODEC, PARTIAL, PairRefs
from swarmnode.gossip.link import Transport
from swarmnode.gossip.wire import FrameHeader, encode_packed, encode_params
from swarmnode.kernels import compress, lowrank
from swarmnode.kernels.errors import SwarmnodeError

log = logging.getLogger(__name__)

# (body, *, source=..., sparse=..., header=...) -> (header, validated vector, or a tk16 frame's
# `compress.Sparse`): the exchange's own decoding (`header`: the frame's, read already)
Decode = Callable[..., Awaitable[tuple[dict[str, Any], np.ndarray]]]
NOT_COMPRESSED = "this peer exchanges uncompressed (`compress` none)"
NO_OUTER_STEP = ("topk", "lowrank")  # codecs after whose rounds no outer step is taken
MAX_PAIR_WEIGHT = 0.5  # past it a pair would overshoot: each side past the other's copy


class CompressedPushPull:
    def __init__(
        self,
        spec: str,
        *,
        self_id: str,
        size: int,
        transport: Transport,
        store: Any,
        decode: Decode,
        timeout: float,
        seed: int = 0,
        init: np.ndarray | None = None,
        segs: lowrank.Segs = (),
    ) -> None:
        codec, ratio = compress.parse_codec(spec)
        self.refs = PairRefs(codec, ratio, size, seed=seed, init=init, segs=segs)
        self.self_id = self_id
        self.transport = transport
        self.store = store
        self.decode = decode
        self.timeout = timeout
        self.busy: set[str] = set()  # partners with an exchange in flight
        self._ended: dict[str, asyncio.Event] = {}  # set when that partner's exchange ends
        self.plain: set[str] = set()  # partners that refused compressed frames
        self.bytes_sent = 0

    # --- initiating ----------------------------------------------------------------------

    async def pushpull(self, peer_id: str, addr: str, x: np.ndarray, weight: float) -> np.ndarray:
        """One compressed push-pull at pair weight `weight`; returns our gossip step d (add it
        to the model: `ParamStore.nudge(d, 1.0)`).
        Raises TransportError / SwarmnodeError like a plain push-pull."""
        if peer_id in self.busy:
            raise RemoteError(f"an exchange with {peer_id} is already in flight", status=503)
        self._hold(peer_id)
        try:
            return await self._pushpull(peer_id, addr, x, weight)
        finally:
            self._release(peer_id)

    def _hold(self, partner: str) -> None:
        self.busy.add(partner)
        self._ended[partner] = asyncio.Event()

    def _release(self, partner: str) -> None:
        self.busy.discard(partner)
        ended = self._ended.pop(partner, None)
        if ended is not None:
            ended.set()

    async def _wait_turn(self, partner: str) -> bool:
        """Whether a push-pull from `partner` may be served now that one with it is in flight:
        never where our id is the smaller (ours goes first: the partner answers it once its own
        request, which we refuse, has come back); otherwise once ours has ended (it is refused
        at once), within half the exchange's deadline so that the partner's request does not
        time out meanwhile."""
        if self.self_id < partner:
            return False
        deadline = asyncio.get_running_loop().time() + self.timeout / 2
        while partner in self.busy:
            ended = self._ended.get(partner)
            left = deadline - asyncio.get_running_loop().time()
            if ended is None or left <= 0:
                return False
            try:
                await asyncio.wait_for(ended.wait(), left)
            except TimeoutError:
                return False
        return True

    async def _pushpull(self, peer_id: str, addr: str, x: np.ndarray, weight: float) -> np.ndarray:
        refs = self.refs
        out = await asyncio.to_thread(refs.encode, peer_id, x)
        extra = {**out.fields, **refs.want(peer_id), "mix": float(weight)}
        frame = await asyncio.to_thread(
            encode_packed, out.packed, sender=self.self_id, step=0, extra=extra
        )
        try:
            answer = await self.transport.request(addr, "pushpull", frame, timeout=self.timeout)
            self.bytes_sent += len(frame)
            source = f"pushpull answer from {peer_id}"
            header, theirs = await self.decode(answer, source=source, sparse=True)
            if not refs.is_ref_frame(header):
                raise WireError(f"{peer_id} answered a compressed push-pull uncompressed")
            await asyncio.to_thread(refs.receive, peer_id, header, theirs)
        except RemoteError as exc:
            if exc.status == 400 and "`compress`" in str(exc):
                self.plain.add(peer_id)  # it does not speak references: go plain with it
                log.info("%s exchanges uncompressed: plain push-pull with it from now", peer_id)
            if exc.status not in (503, CROSSED):  # refused before anything was applied
                refs.forget(peer_id, out, mismatch=exc.status == 409)
            raise
        except (TransportError, SwarmnodeError):
            refs.forget(peer_id)
            raise
        refs.commit(out)
        step = await asyncio.to_thread(refs.gossip_step, peer_id, weight)
        if step is None:  # cannot happen after receive + commit; a bug if it does
            raise AssertionError(f"no reference pair with {peer_id} after an exchange")
        return step

    async def group_round(
        self, picked: list[tuple[str, str]], mix: float, result: Any
    ) -> tuple[list[tuple[str, str]], int]:
        """Compressed push-pulls with every picked partner that speaks them, at once, at pair
        weight `mix` for one partner and 1 / (k + 1) for k; the sum of the pairs' gossip steps
        is queued on the store. Failures go to `result.failures`, answers to
        `result.received`. Returns the partners to exchange with uncompressed, and the bytes
        sent (0: nothing applied)."""
        mine = [(p, a) for p, a in picked if p not in self.plain]
        rest = [(p, a) for p, a in picked if p in self.plain]
        if not mine:
            return rest, 0
        weight = mix if len(picked) == 1 else 1.0 / (len(picked) + 1)
        _, x = await self.store.snapshot()
        sent0 = self.bytes_sent
        outcomes = await asyncio.gather(
            *(self.pushpull(p, a, x, weight) for p, a in mine), return_exceptions=True
        )
        total = None
        for (pid, addr), out in zip(mine, outcomes, strict=True):
            if isinstance(out, (TransportError, SwarmnodeError)):
                result.failures[pid] = str(out)
                if pid in self.plain:  # it just refused compressed frames: plain this round too
                    rest.append((pid, addr))
            elif isinstance(out, BaseException):
                raise out  # a bug, not a peer's failure
            else:
                result.received.append(pid)
                total = out if total is None else total + out
        if total is None:
            return rest, 0
        await self.store.nudge(total, 1.0)
        return rest, max(1, self.bytes_sent - sent0)

    # --- serving -------------------------------------------------------------------------

    async def serve_frame(self, body: bytes, header: FrameHeader | None = None) -> bytes:
        """Decode a compressed push-pull (`header`: its header, read already) and answer it."""
        source = "compressed pushpull request"
        fields, theirs = await self.decode(body, source=source, sparse=True, header=header)
        return await self.serve(fields, theirs)

    async def serve(self, header: dict[str, Any], theirs: np.ndarray | compress.Sparse) -> bytes:
        """Answer a decoded, validated compressed push-pull and queue our gossip step (at the
        pair weight the request names)."""
        partner = header["sender"]
        weight = header.get("mix")
        if not isinstance(weight, float) or not 0.0 < weight <= MAX_PAIR_WEIGHT:
            raise WireError(f"payload header field 'mix' must be a float in (0, {MAX_PAIR_WEIGHT}]")
        if partner in self.busy and not await self._wait_turn(partner):
            raise RemoteError(  # routine when rounds cross: logged at DEBUG
                "busy: an exchange with you is in flight from my side", status=CROSSED, said=True
            )
        self._hold(partner)
        try:
            refs = self.refs
            await asyncio.to_thread(refs.receive, partner, header, theirs)
            step_no, mine = await self.store.snapshot()
            out = await asyncio.to_thread(refs.encode, partner, mine, header)
            refs.commit(out)  # if the answer is lost, the partner's want_* tells us next time
            frame = await asyncio.to_thread(
                encode_packed, out.packed, sender=self.self_id, step=step_no, extra=out.fields
            )
            step = await asyncio.to_thread(refs.gossip_step, partner, weight)
            if step is not None:
                await self.store.nudge(step, 1.0)
            self.bytes_sent += len(frame)
            return frame  # type: ignore[return-value]
        finally:
            self._release(partner)

    # --- the exchange's strategy (`Compression`) --------------------------------------------

    @property
    def outer_step_applies(self) -> bool:
        """Whether the exchange's outer step follows a round. Not with topk: the outer step takes
        the round's end for the group's mean and amplifies the progress since the last one, but a
        topk round moves x only by what the pair copies know (1% a round), so what it amplifies
        is mostly this peer's own local steps: more drift and overfitting to its shard. Measured
        on the lab (4 peers, 5 M parameters, 300 steps, two pairs of runs): 77.4 and 77.5% with it,
        78.6 and 78.7% without (uncompressed: 79.5%); int8 and fp16 copies follow x closely, and
        int8 with the outer step ended above the uncompressed run (docs/benchmarks.md). lowrank
        also sends part of each difference (its top directions), and is treated as topk is.
        topk2 sends part too, but at its density (5-10% of each chunk, its copies a few rounds
        behind x) the outer step helps it as it does the uncompressed swarm: on the portfolio's
        overfit task (4 real peers, paced, late-window worst peer, topk2:0.07) 71.5 and 71.5%
        with it against 70.0 and 67.3% without on dirichlet:0.5, 72.4 against 71.5% on iid."""
        return self.refs.codec not in NO_OUTER_STEP

    def pull_fields(self) -> dict[str, Any]:
        """What a pull states of our shared start."""
        return self.refs.want_init()

    def frame_counts(self) -> dict[str, int]:
        refs = self.refs
        return {
            "full_frames": refs.full_frames,
            "delta_frames": refs.delta_frames,
            "start_frames": refs.init_frames,
        }

    async def serve_if_compressed(self, body: bytes, header: FrameHeader) -> bytes | None:
        """The answer to a compressed push-pull; None for a plain one, which the exchange
        answers as it always did."""
        if not PairRefs.is_ref_frame(header.fields):
            return None
        return await self.serve_frame(body, header)

    # --- state sync on the shared start ------------------------------------------------

    async def serve_pull(self, msg: dict[str, Any], step: int, vec: np.ndarray) -> bytes | None:
        """A member's pull naming our shared start (`want_*`: a joiner's state sync) is answered
        with x - x0 in the whole-model codec (a joiner must start from the swarm's model, not
        from 1% of it; int8 of a difference is more precise than of the model, for the same
        bytes) and opens the pair on it, as a first push-pull would: the joiner's copy
        of us and our `sent` for it are the same bytes, and later deltas carry the rest. None
        (a whole-model answer) for any other pull, or while an exchange with it is in flight."""
        partner = msg.get("sender")
        want = {"want_epoch": msg.get("want_epoch"), "want_ver": msg.get("want_ver")}
        if not isinstance(partner, str) or partner in self.busy or not self.refs.init_ok(want):
            return None
        self._hold(partner)
        try:
            encode = functools.partial(self.refs.encode, dense_start=True)
            out = await asyncio.to_thread(encode, partner, vec, want)
            self.refs.commit(out)  # if the answer is lost, the joiner's want_* tells us later
            frame = await asyncio.to_thread(
                encode_packed, out.packed, sender=self.self_id, step=step, extra=out.fields
            )
        finally:
            self._release(partner)
        self.bytes_sent += len(frame)
        return frame  # type: ignore[return-value]

    async def from_pull(self, partner: str, header: dict[str, Any], vec: np.ndarray) -> np.ndarray:
        """The model a pull answer stands for: as it came, or (a frame on our shared start)
        x0 + the difference, which also becomes our copy of the partner. Raises `RefMismatch`
        (any other reference frame) or `WireError` (it overflowed)."""
        if not PairRefs.is_ref_frame(header):
            return vec
        copy = await asyncio.to_thread(self.refs.receive, partner, header, vec)
        return copy.copy()  # the copy moves with later gossip steps; the caller keeps this one


class Compression(Protocol):
    """How the exchange's push-pulls travel: `CompressedPushPull`, or `Uncompressed` (`compress`
    none, and robust mode). The exchanger calls these and never asks which one it holds."""

    outer_step_applies: bool  # whether the outer step follows a round (see CompressedPushPull)

    async def group_round(
        self, picked: list[tuple[str, str]], mix: float, result: Any
    ) -> tuple[list[tuple[str, str]], int]:
        """Push-pull the picked partners that speak it; (the rest, for a plain push-pull, and
        the bytes it sent)."""
        ...

    async def serve_if_compressed(self, body: bytes, header: FrameHeader) -> bytes | None:
        """The answer to a compressed push-pull (`header`: the frame's, read once by the
        exchanger), or None for a plain one."""
        ...

    async def serve_pull(self, msg: dict[str, Any], step: int, vec: np.ndarray) -> bytes | None:
        """A pull answered on our shared start, or None (answer with the whole model)."""
        ...

    async def from_pull(self, partner: str, header: dict[str, Any], vec: np.ndarray) -> np.ndarray:
        """The model a pull answer stands for."""
        ...

    def pull_fields(self) -> dict[str, Any]:
        """What a pull states of our shared start (empty: none)."""
        ...

    def frame_counts(self) -> dict[str, int]:
        """Frames sent whole, as deltas, and on the shared start (for status)."""
        ...


class Uncompressed:
    """Whole models both ways: every partner gets the plain push-pull, and a compressed frame
    is refused with a clear 400 (the sender then talks to us uncompressed)."""

    outer_step_applies = True

    async def group_round(
        self, picked: list[tuple[str, str]], mix: float, result: Any
    ) -> tuple[list[tuple[str, str]], int]:
        return list(picked), 0

    async def serve_if_compressed(self, body: bytes, header: FrameHeader) -> bytes | None:
        refuse_compressed(header.fields)
        return None

    async def serve_pull(self, msg: dict[str, Any], step: int, vec: np.ndarray) -> bytes | None:
        return None

    async def from_pull(self, partner: str, header: dict[str, Any], vec: np.ndarray) -> np.ndarray:
        return vec

    def pull_fields(self) -> dict[str, Any]:
        return {}

    def frame_counts(self) -> dict[str, int]:
        return {"full_frames": 0, "delta_frames": 0, "start_frames": 0}


def check_config(mode: str, spec: str) -> str | None:
    """Why `compress` cannot be used with this exchange `mode` (None: it can)."""
    try:
        codec, _ = compress.parse_codec(spec)
    except SwarmnodeError as exc:
        return f"`compress`: {exc}"
    if codec in PARTIAL and mode != "average":
        return f"`compress` {codec} needs `mode` average (a robust rule needs whole models)"
    return None


def pull_codec(spec: str) -> str | None:
    """The codec whole-model answers (pulls, state sync, plain push-pulls) are sent in: fp16 and
    int8 quantise the model itself (no error feedback there), topk sends int8 (its full-frame
    codec: a joiner's state sync was most of a short topk run's bytes in raw); none sends raw."""
    codec, _ = compress.parse_codec(spec)
    return FULL_CODEC.get(codec)


def encode_model(vec: np.ndarray, codec: str | None, sender: str, step: int) -> memoryview:
    if codec is None:
        return encode_params(vec, sender=sender, step=step)
    return encode_packed(compress.encode(vec, codec), sender=sender, step=step)


def build(
    cfg: Any,
    self_id: str,
    store: Any,
    transport: Transport,
    decode: Decode,
    init: np.ndarray | None = None,
    segs: lowrank.Segs = (),
) -> Compression:
    """The push-pull strategy of an `ExchangeConfig` (`Uncompressed`: `compress` none, or robust);
    `init`: the model's initial parameters, the pairs' shared start (`gossip.exchange.refs`); `segs`:
    the model's matrices for lowrank (none given: the vector as one row, sent whole)."""
    if cfg.compress == "none" or cfg.mode != "average":
        return Uncompressed()
    return CompressedPushPull(
        cfg.compress, self_id=self_id, size=store.size, transport=transport, store=store,
        decode=decode, timeout=cfg.timeout, init=init, segs=segs,
    )  # fmt: skip


def refuse_compressed(header: dict[str, Any]) -> None:
    """What a peer exchanging uncompressed does with a compressed push-pull: a clear 400."""
    if PairRefs.is_ref_frame(header):
        raise RemoteError(f"compressed push-pull refused: {NOT_COMPRESSED}", status=400)
