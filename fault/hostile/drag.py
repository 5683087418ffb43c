"""The drag: one insider that pushes many small signed models, each inside the push bound, all
toward the same model with every hidden ReLU dead (what the push budget bounds: docs/security.md,
"Hostile insiders").

It is a member like any other under `open` admission (or an insider holding the secret): a key
of its own, its signed record joined to a peer and kept beating in digests to every honest peer,
its address the discard port (an honest round that picks it fails at once and backs off). Then,
`rate` times a second, it push-pulls an honest peer in turn with

    y = x + s (t - x) / |t - x|,     t = x with every hidden bias at `bias`,

x the model that peer answered with last (its pushpull answers keep the attacker current), and s
= `share` x the bound's radius as the attacker estimates it: 4 x the median distance between the
honest models it holds (gossip/robust/push_guard.py). Each push then looks like an honest
model a little ahead of the others, and is mixed at the pairwise weight; at 150 pushes a second
the biases sink until no hidden unit fires, and a dead unit gets no gradient to come back with.

Which coordinates are hidden biases follows from `--model` and `--data` (dense `mlp:` models:
`hidden_biases`). `report()`: pushes sent, answers by status, and `accepted` None (whether a
push was mixed is the victim's business: the bar is the honest accuracy, read by the chaos
assertions).
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Callable
from typing import Any

import aiohttp
import numpy as np
from swarmnode.fault.hostile.speak import Speaker
from swarmnode.gossip.auth import SIGNED_ROUTES, PeerKey, Signer
from swarmnode.gossip.errors import WireError
from swarmnode.gossip.membership import Gossiped, RecordSigner, to_wire
from swarmnode.gossip.wire import decode_params, encode_control, encode_params
from swarmnode.kernels.errors import SwarmnodeError
from swarmnode.kernels.layers import Flatten, Linear, ReLU
from swarmnode.kernels.model import plan

SINK_ADDR = "127.0.0.1:9"  # the discard port: an honest round that picks the insider fails fast
BEAT_EVERY_S = 0.5  # the insider's heartbeat, to every honest peer (it must stay a live member)
RADIUS_FACTOR = 4.0  # the push bound's factor (gossip/robust/push_guard.py RADIUS_FACTOR)
MAX_INFLIGHT = 16  # pushes in flight at once


class DragError(SwarmnodeError, ValueError):
    """The drag cannot be aimed at this model (not a dense `mlp:`, or an unknown data set)."""


def hidden_biases(model: str, data: str) -> list[tuple[int, int]]:
    """[lo, hi) of every hidden layer's bias in the flat parameter vector of `--model` on
    `--data` (dense ReLU `mlp:` models on `digits`, `signal:` or `synthetic:` only)."""
    shape, classes = _data_shape(data)
    kind, _, rest = model.replace(" ", "").lower().partition(":")
    body, _, act = rest.partition("/")
    if kind != "mlp" or act not in ("", "relu"):
        raise DragError(f"the drag aims at dense ReLU models (mlp:W,...), not {model!r}")
    widths = [int(w) for w in body.split(",") if w]
    layers: list[Any] = [Flatten()]
    for w in widths:
        layers += [Linear(w), ReLU()]
    layers.append(Linear(classes))
    per_layer, _ = plan(layers, shape)
    out, offset = [], 0
    last = len(layers) - 1
    for i, specs in enumerate(per_layer):
        for name, s in specs:
            n = math.prod(s)
            if name.endswith(".b") and i != last:
                out.append((offset, offset + n))
            offset += n
    return out


def _data_shape(data: str) -> tuple[tuple[int, ...], int]:
    if data == "digits":
        return (8, 8), 10
    kind, _, args = data.partition(":")
    nums = [int(a) for a in args.split(",") if a]
    if kind in ("signal", "synthetic") and len(nums) >= 3:
        return (nums[1],), nums[2]
    raise DragError(f"the drag knows the shapes of digits, signal: and synthetic:, not {data!r}")


class DragInsider:
    kind = "drag"

    def __init__(
        self,
        targets: Callable[[], list[str]],
        rate: float,
        biases: list[tuple[int, int]],
        *,
        secret: str | None = None,
        share: float = 0.9,
        bias: float = -1e3,
        timeout: float = 3.0,
    ) -> None:
        if not biases:
            raise DragError("no hidden bias to drag")
        self.targets, self.rate, self.biases = targets, rate, biases
        self.share, self.bias, self.timeout = share, bias, timeout
        self.key = PeerKey.generate()
        self.peer_id = self.key.peer_id
        # requests on the model routes are signed by the insider's own key, as a member's are
        self.signer = Signer(secret, key=self.key, signed_routes=SIGNED_ROUTES, name=SINK_ADDR)
        self._record = RecordSigner(self.key, clock=time.monotonic)
        self._beat = 0
        self.models: dict[str, np.ndarray] = {}  # the latest model each victim answered with
        self.pushes = 0
        self.answered = 0
        self.joined = False
        self.step_sizes: list[float] = []  # the push distance, sampled once a second
        self.statuses: dict[str, int] = {}

    async def run(self, seconds: float) -> None:
        end = time.monotonic() + seconds
        async with aiohttp.ClientSession() as session:
            speaker = Speaker(session, self.signer)
            try:
                await self._join(speaker)
                beat = asyncio.create_task(self._keep_beating(speaker), name="drag-beat")
                try:
                    await self._drag(speaker, end)
                finally:
                    beat.cancel()
                    await asyncio.gather(beat, return_exceptions=True)
            finally:
                self.statuses = dict(speaker.statuses)

    # --- membership: a live member like any other --------------------------------------------

    def _entry(self) -> list[Any]:
        self._beat += 1
        g = Gossiped(self.peer_id, SINK_ADDR, 1, self._beat, "alive", 0.0, {})
        return to_wire(self._record.entry(g))

    async def _join(self, speaker: Speaker) -> None:
        for addr in self.targets():
            status, _ = await speaker.post(
                addr, "join", encode_control("join", member=self._entry())
            )
            if status == 200:
                self.joined = True
                return

    async def _keep_beating(self, speaker: Speaker) -> None:
        while True:
            body = encode_control("gossip", sender=self.peer_id, members=[self._entry()])
            await asyncio.gather(*(speaker.post(a, "gossip", body) for a in self.targets()))
            await asyncio.sleep(BEAT_EVERY_S)

    # --- the pushes -----------------------------------------------------------------------

    async def _drag(self, speaker: Speaker, end: float) -> None:
        room = asyncio.Semaphore(MAX_INFLIGHT)
        tasks: set[asyncio.Task[None]] = set()
        start, i, last_sample = time.monotonic(), 0, 0.0
        try:
            while (now := time.monotonic()) < end:
                victims = self.targets()
                if victims:
                    addr = victims[i % len(victims)]
                    await room.acquire()
                    task = asyncio.create_task(self._push(speaker, addr, room))
                    tasks.add(task)
                    task.add_done_callback(tasks.discard)
                    if now - last_sample >= 1.0:
                        last_sample = now
                        self.step_sizes.append(round(self._step_size(), 6))
                i += 1
                delay = min(start + i / self.rate, end) - time.monotonic()
                if delay > 0:
                    await asyncio.sleep(delay)
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

    async def _push(self, speaker: Speaker, addr: str, room: asyncio.Semaphore) -> None:
        try:
            x = self.models.get(addr)
            if x is None:  # first contact: pull it (a member may)
                body = encode_control("pull", sender=self.peer_id)
                status, data = await speaker.post(addr, "params", body)
                self._remember(addr, status, data)
                return
            y = await asyncio.to_thread(self._pushed, x)
            frame = bytes(encode_params(y, sender=self.peer_id, step=1))
            status, data = await speaker.post(addr, "pushpull", frame)
            self.pushes += 1
            self.answered += status == 200
            self._remember(addr, status, data)
        finally:
            room.release()

    def _remember(self, addr: str, status: int, data: bytes) -> None:
        if status != 200:
            return
        try:
            _, vec = decode_params(data)
        except WireError:
            return
        self.models[addr] = np.array(vec, dtype=np.float32)

    def _step_size(self) -> float:
        """share x 4 x the median distance between the honest models held (the bound's radius
        as seen from outside); a small step until two models are known."""
        models = list(self.models.values())
        dists = [
            float(np.linalg.norm(models[i] - models[j]))
            for i in range(len(models))
            for j in range(i + 1, len(models))
        ]
        if not dists:
            return 0.0
        return self.share * RADIUS_FACTOR * float(np.median(dists))

    def _pushed(self, x: np.ndarray) -> np.ndarray:
        """x moved `_step_size()` toward x with every hidden bias at `bias`."""
        delta = np.zeros_like(x)
        for lo, hi in self.biases:
            delta[lo:hi] = self.bias - x[lo:hi]
        norm = float(np.linalg.norm(delta))
        step = min(self._step_size(), norm)
        if norm <= 0 or step <= 0:
            return x
        return (x + delta * np.float32(step / norm)).astype(np.float32)

    def report(self) -> dict[str, Any]:
        return {
            "insider": self.peer_id,
            "joined": self.joined,
            "pushes": self.pushes,
            "answered": self.answered,
            "step_sizes": self.step_sizes[:120],
            "statuses": self.statuses,
            "accepted": None,  # the bar is the honest accuracy (chaos assertions)
        }
