"""The `node` mode of scripts/bench/exchange.py: one real peer against a real `swarmnode start`.

Not a transport figure: the bench process runs the exact code one peer runs against another,

    bench process                                         `swarmnode start` process
    Exchanger(average).round()                            http_app -> Exchanger._handle_pushpull
      snapshot into a wire frame + xxh3                     read the body
        (one copy, in a thread)                             decode + xxh3 + validate, and
      HttpTransport POST /v1/pushpull   ------ N B ---->      at once: snapshot into a frame
                                        <----- N B -----    fold the mix into the pending update
      decode + xxh3 + validate (in a thread)                  (its own thread, after answering)
      queue the mix

and each `round()` is timed from the outside. The node trains for real (`--steps 0`) but with
`--slowdown` so its training thread sleeps most of the time and does not take the CPU the
exchange is measured on; `--sync-every` is huge and it is alone in its swarm, so it never starts
an exchange of its own. Mixes queued in the bench's store are applied between two timed rounds
(where a training thread would apply them, between two steps).

Used by scripts/bench/exchange.py only.
"""

from __future__ import annotations

import asyncio
import os
import resource
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from swarmnode.fault.chaos.processes import START_COMMAND, PeerStartError, start_peer  # noqa: E402
from swarmnode.gossip.auth.peer_key import PeerKey  # noqa: E402
from swarmnode.gossip.auth.signer import SIGNED_ROUTES, Signer  # noqa: E402
from swarmnode.gossip.auth.transport import AuthTransport  # noqa: E402
from swarmnode.gossip.exchange.exchanger import ExchangeConfig, Exchanger  # noqa: E402
from swarmnode.gossip.membership.service import Membership  # noqa: E402
from swarmnode.gossip.wire import frames as wire  # noqa: E402
from swarmnode.gossip.wire.control import encode_control  # noqa: E402
from swarmnode.node.net.transport import HttpTransport  # noqa: E402

from scripts.netlab.net import Link  # noqa: E402

SECRET = "bench-secret"
# The node modes, each against a `swarmnode start` of its own, all in one run:
#   node    unsigned: the node started with --unsigned-exchange-for-bench (the path before
#           issue 10 item 3: no envelope on params/pushpull)
#   signed  open admission: requests signed by the bench's member key (Ed25519 over BLAKE3)
#   secret  --secret: the same signature and the swarm secret's HMAC, answers sealed too
NODE_MODES = ("node", "signed", "secret")


START_TIMEOUT_S = 300.0  # building a 25M-parameter model on a busy machine takes a while
EXCHANGE_TIMEOUT_S = 120.0


class BenchStore:
    """A numpy `ParamStore` with the node's semantics: snapshots are copies taken in a thread,
    `mix_in` only queues (the bench applies the queue between two timed rounds)."""

    def __init__(self, x: np.ndarray) -> None:
        self.x = np.ascontiguousarray(x, dtype=np.float32)
        self.size = int(self.x.size)
        self.pending: list[tuple[np.ndarray, float, bool]] = []  # (vector, weight, a nudge?)

    async def snapshot(self) -> tuple[int, np.ndarray]:
        return 0, await asyncio.to_thread(self.x.copy)

    async def snapshot_frame(self, sender: str) -> memoryview:
        """As the node's WorkerStore does: the model copied once, straight into the frame."""

        def fill(payload: np.ndarray) -> int:
            np.copyto(payload, self.x)
            return 0

        return await asyncio.to_thread(wire.encode_into_frame, self.size, fill, sender=sender)

    async def mix_in(self, other: np.ndarray, weight: float) -> None:
        self.pending.append((other, weight, False))

    async def nudge(self, delta: np.ndarray, weight: float) -> None:
        self.pending.append((delta, weight, True))

    async def outer_step(self, lr: float, momentum: float) -> None:
        return None  # no outer optimizer: the bench times the exchange alone

    async def heading(self) -> np.ndarray | None:
        return None

    def apply_pending(self) -> None:
        for other, weight, nudge in self.pending:
            if not nudge:
                self.x *= 1.0 - weight
            self.x += weight * other
        self.pending.clear()


class OnePeer:
    """The `PeerDirectory` of the bench: always the node."""

    def __init__(self, peer_id: str, addr: str) -> None:
        self.peer = (peer_id, addr)

    def sample(self, k: int) -> list[tuple[str, str]]:
        return [self.peer][:k]

    def is_member(self, peer_id: str) -> bool:
        return peer_id == self.peer[0]


class NodeProcess:
    """A `swarmnode start` child process (swarmnode.fault.chaos.processes); always `close()` it."""

    def __init__(
        self,
        model: str,
        *,
        slowdown: float,
        device: str,
        workdir: Path,
        mode: str = "node",
        link: Link | None = None,
    ) -> None:
        self.model = model
        self.mode = mode
        args = [
            *("--steps", "0", "--model", model, "--data", "digits", "--device", device),
            *("--slowdown", str(slowdown), "--exchange", "average"),
            *("--sync-every", "1000000000", "--eval-every", "1000000000"),
            *("--exchange-timeout", str(EXCHANGE_TIMEOUT_S)),
            *(["--unsigned-exchange-for-bench"] if mode == "node" else []),
            *(["--secret", SECRET] if mode == "secret" else []),
        ]
        command: tuple[str, ...] = START_COMMAND
        if link is not None:  # behind a shaped link in its own namespace (scripts/netlab)
            command = ("ip", "netns", "exec", link.ns, *START_COMMAND)
            addr = f"{link.ip}:7070"
            args += ["--listen", addr, "--advertise", addr]
        # The shell's environment as it is: a lone node measured against this process keeps the
        # BLAS threads it would have, unlike the peers of a swarm sharing a few cores.
        self.process = start_peer(
            args, workdir, "node", dict(os.environ), command=command, log_name="node.log", cwd=ROOT
        )
        self.proc = self.process.proc
        self.addr = ""
        self.peer_id = ""

    def wait_ready(self, timeout: float = START_TIMEOUT_S) -> None:
        try:
            self.process.wait_ready(time.monotonic() + timeout)
        except PeerStartError as exc:
            raise RuntimeError(f"node ({self.model}): {exc}") from None
        self.addr, self.peer_id = self.process.addr, self.process.peer_id

    def cpu_seconds(self) -> float:
        """utime + stime of the node process, all threads (Linux /proc; NaN elsewhere)."""
        try:
            fields = Path(f"/proc/{self.proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
            return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
        except (OSError, IndexError, ValueError):
            return float("nan")

    def log_tail(self, n: int = 20) -> str:
        return self.process.log_tail(n)

    def close(self) -> None:
        self.process.stop(grace=10.0)  # SIGTERM: the peer leaves and exits within ~5 s


class NodeBench:
    """An `Exchanger` in this process against one node process: `round()` is timed."""

    def __init__(self, node: NodeProcess) -> None:
        self.node = node
        self.key = PeerKey.generate()  # the bench is a member of the node's swarm, like a peer
        secret = SECRET if node.mode == "secret" else None
        routes = () if node.mode == "node" else SIGNED_ROUTES
        self.signer = Signer(secret, key=self.key, signed_routes=routes, name="127.0.0.1:9")
        self.member: Membership | None = None
        self.transport: Any = None
        self.ex: Exchanger | None = None
        self.frame_bytes = 0
        self.n_params = 0

    async def connect(self) -> None:
        """Join the node's swarm (its table then holds our key), pull its model once (its size;
        a near-identical start for ours)."""
        self.member = Membership(
            self.key.peer_id, "127.0.0.1:9", self._signed(HttpTransport()), key=self.key
        )
        await self.member.join([self.node.addr], timeout=EXCHANGE_TIMEOUT_S)
        probe = self._signed(HttpTransport())
        try:
            body = encode_control("pull", sender=self.key.peer_id)
            answer = await probe.request(self.node.addr, "params", body, timeout=EXCHANGE_TIMEOUT_S)
        finally:
            await probe.close()
        _, theirs = await asyncio.to_thread(wire.decode_params, answer)
        n = int(theirs.size)
        rng = np.random.default_rng(0)
        mine = theirs.astype(np.float32) + np.float32(1e-3) * rng.standard_normal(
            n, dtype=np.float32
        )
        self.n_params = n
        self.frame_bytes = len(wire.encode_params(mine, sender=self.key.peer_id, step=0))
        cap = wire.max_frame_bytes(n) + 1024  # an envelope's header on top of the frame
        self.transport = self._signed(HttpTransport(max_response_bytes=cap))
        self.ex = Exchanger(
            ExchangeConfig(mode="average", timeout=EXCHANGE_TIMEOUT_S, mix=0.5),
            self_id=self.key.peer_id,
            transport=self.transport,
            store=BenchStore(mine),
            peers=OnePeer(self.node.peer_id, self.node.addr),
        )

    async def round(self) -> tuple[float, float]:
        """(wall seconds of one `Exchanger.round()`, CPU seconds of both processes)."""
        assert self.ex is not None and self.member is not None
        for _ in range(3):
            # Untimed: a fresh heartbeat keeps us a live member. Between rounds this loop does
            # not run, and if the node declared us dead meanwhile (a loaded box), the first
            # answer says so and the next round carries our refutation (membership's usual way
            # back); a round refused as "not a live member" is not timed, only retried.
            for _ in range(2):
                await self.member.gossip_round()
            cpu0 = _own_cpu() + self.node.cpu_seconds()
            t0 = time.perf_counter()
            result = await self.ex.round()
            wall = time.perf_counter() - t0
            cpu = _own_cpu() + self.node.cpu_seconds() - cpu0
            if result.applied or "not a live member" not in str(result.failures):
                break
        if not result.applied:
            raise RuntimeError(f"exchange with the node failed: {result.failures or result.note}")
        self.ex.store.apply_pending()  # type: ignore[attr-defined]  # untimed: "between steps"
        return wall, cpu

    async def close(self) -> None:
        if self.member is not None:
            await self.member.close()
            await self.member.transport.close()
        if self.transport is not None:
            await self.transport.close()

    def _signed(self, transport: HttpTransport) -> Any:
        """Requests sealed and answers opened exactly as a peer of this mode does."""
        return AuthTransport(transport, self.signer)


def _own_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)  # all threads: encode/decode ones too
    return usage.ru_utime + usage.ru_stime


def workdir() -> tempfile.TemporaryDirectory[str]:
    return tempfile.TemporaryDirectory(prefix="bench-exchange-")
