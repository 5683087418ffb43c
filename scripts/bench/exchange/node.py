"""The `node` mode of scripts/bench/exchange/throughput.py: one real peer against a real
`swarmnode start`.

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

Used by scripts/bench/exchange/throughput.py only.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import os
import resource
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT))

from swarmnode.fault.chaos.processes import START_COMMAND, PeerStartError, start_peer  # noqa: E402
from swarmnode.gossip.auth.peer_key import PeerKey  # noqa: E402
from swarmnode.gossip.auth.signer import SIGNED_ROUTES, Signer  # noqa: E402
from swarmnode.gossip.auth.transport import AuthTransport  # noqa: E402
from swarmnode.gossip.exchange.exchanger import ExchangeConfig, Exchanger  # noqa: E402
from swarmnode.gossip.membership.service import Membership  # noqa: E402
from swarmnode.gossip.robust import chunked  # noqa: E402
from swarmnode.gossip.wire import bufpool  # noqa: E402
from swarmnode.gossip.wire import frames as wire  # noqa: E402
from swarmnode.gossip.wire.control import encode_control  # noqa: E402
from swarmnode.node.net.transport import HttpTransport  # noqa: E402
from swarmnode.node.train.mixing.mixes import MixAccumulator  # noqa: E402

from scripts.netlab.net import Link  # noqa: E402

SECRET = "bench-secret"
PUSH_BUDGET = True  # the initiator's --push-budget (throughput.py --push-budget)
# The node modes, each against a `swarmnode start` of its own, all in one run:
#   node    unsigned: the node started with --unsigned-exchange-for-bench (the path before
#           issue 10 item 3: no envelope on params/pushpull)
#   signed  open admission: requests signed by the bench's member key (Ed25519 over BLAKE3)
#   secret  --secret: the same signature and the swarm secret's HMAC, answers sealed too
#   fp16, lowrank  signed, both sides --compress fp16 / lowrank:8: compressed differences
#           against a reference the pair shares (gossip/exchange/compressed.py)
NODE_MODES = ("node", "signed", "secret", "fp16", "lowrank")
COMPRESS = {"fp16": "fp16", "lowrank": "lowrank:8"}
TRACER = ROOT / "scripts" / "bench" / "exchange" / "passes.py"


START_TIMEOUT_S = 300.0  # building a 25M-parameter model on a busy machine takes a while
EXCHANGE_TIMEOUT_S = 120.0
MEMBER_RETRIES = 8  # rounds refused as "not a live member" (a loaded box) retried, untimed


class BenchStore:
    """A numpy `ParamStore` with the node's semantics (node/peer/param_store.py): snapshots
    are copies taken in a thread, the framed one straight into the frame; `mix_in` and `nudge`
    fold into a `MixAccumulator` on a thread of their own, as the node's fold thread does, and
    the bench applies the fold between two timed rounds (where a training thread would, between
    two steps)."""

    def __init__(self, x: np.ndarray) -> None:
        self.x = np.ascontiguousarray(x, dtype=np.float32)
        self.size = int(self.x.size)
        self.mixes = MixAccumulator(np, self.size)
        self._folder = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="bench-mix")
        self._folds: list[concurrent.futures.Future[None]] = []

    def snapshot_into(self, out: np.ndarray) -> int:
        np.copyto(out, self.x)
        return 0

    def take_snapshot(self) -> tuple[int, np.ndarray]:
        out = bufpool.floats(self.size)  # reused, as the node's are
        return self.snapshot_into(out), out

    async def snapshot(self) -> tuple[int, np.ndarray]:
        return await asyncio.to_thread(self.take_snapshot)

    async def snapshot_frame(self, sender: str) -> memoryview:
        """As the node's WorkerStore does: the model copied once, straight into the frame."""
        return await asyncio.to_thread(
            wire.encode_into_frame, self.size, self.snapshot_into, sender=sender
        )

    async def distance(self, other: np.ndarray) -> float:
        return await asyncio.to_thread(chunked.distance, self.x, other)

    async def norm(self) -> float:
        return await asyncio.to_thread(chunked.norm, self.x)

    async def mix_in(
        self, other: np.ndarray, weight: float, source: str = "", moved: Any = None
    ) -> None:
        """As the node's store: the fold counts its move into my round's `moved`."""
        fold = self._folder.submit(self.mixes.add, other, weight, x=self.x, moved=moved)
        self._folds.append(fold)
        if moved is not None:
            await asyncio.wrap_future(fold)

    async def nudge(self, delta: np.ndarray, weight: float) -> None:
        self._folds.append(self._folder.submit(self.mixes.nudge, delta, weight))

    async def outer_step(self, lr: float, momentum: float) -> None:
        return None  # no outer optimizer: the bench times the exchange alone

    async def heading(self) -> np.ndarray | None:
        return None

    def apply_pending(self) -> None:
        for fold in self._folds:
            fold.result()
        self._folds.clear()
        self.mixes.apply_to(self.x)

    def close(self) -> None:
        self._folder.shutdown(wait=True)


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
        trace: Path | None = None,
    ) -> None:
        self.model = model
        self.mode = mode
        self.trace = trace
        args = [
            *("--steps", "0", "--model", model, "--data", "digits", "--device", device),
            *("--slowdown", str(slowdown), "--exchange", "average"),
            *("--sync-every", "1000000000", "--eval-every", "1000000000"),
            *("--exchange-timeout", str(EXCHANGE_TIMEOUT_S)),
            # alone, the node has no rounds of its own, in which a sender's push credit is
            # counted (gossip/robust/push_budget.py): with the budget on it would mix two
            # pushes and answer the rest unmixed, and the bench would time less than the mix
            *("--push-budget", "off"),
            *(["--unsigned-exchange-for-bench"] if mode == "node" else []),
            *(["--secret", SECRET] if mode == "secret" else []),
            *(["--compress", COMPRESS[mode]] if mode in COMPRESS else []),
        ]
        command: tuple[str, ...] = START_COMMAND
        if trace is not None:  # every pass over the data logged (scripts/bench/exchange/passes.py)
            command = (sys.executable, str(TRACER), "--out", str(trace), "--", "start")
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

    def rss(self) -> tuple[int, int]:
        """(resident bytes now, peak since the last `reset_peak`) of the node process."""
        return rss_of(self.proc.pid)

    def reset_peak(self) -> None:
        reset_peak(self.proc.pid)

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
        self.store: BenchStore | None = None
        self.bytes_per_round = 0  # what the last round pushed (a compressed frame: its size)
        self.member: Membership | None = None
        self.transport: Any = None
        self.ex: Exchanger | None = None
        self.frame_bytes = 0
        self.n_params = 0
        self.window_start = self.window_end = 0.0  # the last round, on time.monotonic()

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
        self.bytes_per_round = self.frame_bytes
        cap = wire.max_frame_bytes(n) + 1024  # an envelope's header on top of the frame
        self.transport = self._signed(HttpTransport(max_response_bytes=cap))
        compress = COMPRESS.get(self.node.mode, "none")
        init, segs = start_and_segments(self.node.model) if compress != "none" else (None, ())
        self.store = BenchStore(mine)
        self.ex = Exchanger(
            ExchangeConfig(
                mode="average",
                timeout=EXCHANGE_TIMEOUT_S,
                mix=0.5,
                compress=compress,
                push_budget=PUSH_BUDGET,
            ),
            self_id=self.key.peer_id,
            transport=self.transport,
            store=self.store,
            peers=OnePeer(self.node.peer_id, self.node.addr),
            init=init,  # the node's seed and model: the pair's shared start (exchange/refs.py)
            segs=segs,
        )

    async def round(self) -> tuple[float, float]:
        """(wall seconds of one `Exchanger.round()`, CPU seconds of both processes)."""
        assert self.ex is not None and self.member is not None
        for _ in range(MEMBER_RETRIES):
            # Untimed: a fresh heartbeat keeps us a live member. Between rounds this loop does
            # not run, and if the node declared us dead meanwhile (a loaded box), the first
            # answer says so and the next round carries our refutation (membership's usual way
            # back); a round refused as "not a live member" is not timed, only retried.
            for _ in range(2):
                await self.member.gossip_round()
            cpu0 = _own_cpu() + self.node.cpu_seconds()
            sent0 = self.ex.bytes_sent
            self.window_start = time.monotonic()
            t0 = time.perf_counter()
            result = await self.ex.round()
            wall = time.perf_counter() - t0
            cpu = _own_cpu() + self.node.cpu_seconds() - cpu0
            self.bytes_per_round = self.ex.bytes_sent - sent0
            if result.applied or "not a live member" not in str(result.failures):
                break
        if not result.applied:
            raise RuntimeError(f"exchange with the node failed: {result.failures or result.note}")
        assert self.store is not None
        await asyncio.to_thread(self.store.apply_pending)  # untimed: "between two steps"
        self.window_end = time.monotonic()
        return wall, cpu

    async def close(self) -> None:
        if self.store is not None:
            self.store.close()
        if self.member is not None:
            await self.member.close()
            await self.member.transport.close()
        if self.transport is not None:
            await self.transport.close()

    def _signed(self, transport: HttpTransport) -> Any:
        """Requests sealed and answers opened exactly as a peer of this mode does."""
        return AuthTransport(transport, self.signer)


def rss_of(pid: int | str = "self") -> tuple[int, int]:
    """(VmRSS, VmHWM) in bytes from /proc (Linux; (0, 0) elsewhere)."""
    try:
        text = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return 0, 0
    fields = dict(line.split(":", 1) for line in text.splitlines() if ":" in line)
    return tuple(int(fields[k].split()[0]) * 1024 for k in ("VmRSS", "VmHWM"))  # type: ignore[return-value]


def reset_peak(pid: int | str = "self") -> None:
    """Reset a process's peak RSS (VmHWM) to its RSS now (Linux: `clear_refs` 5)."""
    try:
        Path(f"/proc/{pid}/clear_refs").write_text("5")
    except OSError:
        pass


def _own_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)  # all threads: encode/decode ones too
    return usage.ru_utime + usage.ru_stime


def start_and_segments(model: str) -> tuple[np.ndarray, tuple[tuple[int, int], ...]]:
    """The initial parameters of a node of this model (the default seed, digits: 64 inputs,
    10 classes) and its matrices, as a peer of the same swarm holds them (compressed pairs
    start there; lowrank factors each matrix)."""
    from swarmnode.kernels import lowrank
    from swarmnode.kernels.backend import select_backend
    from swarmnode.node.train.model.builtin import build_model

    net = build_model(model, (64,), 10, select_backend("cpu"), 0)
    segs = lowrank.segments([tuple(v.shape) for v in net.params.views.values()])
    return np.array(net.params.data, dtype=np.float32), segs


def workdir() -> tempfile.TemporaryDirectory[str]:
    return tempfile.TemporaryDirectory(prefix="bench-exchange-")
