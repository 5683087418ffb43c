"""The `--link` rows of scripts/bench/exchange/throughput.py: what each direction of a shaped link
carried.

A round's wall time alone cannot say whether its push and its answer overlapped, nor what rate
each direction reached: `LinkMeter` samples the byte counters of a peer's veth end on the host
(scripts/netlab/net.py: its tx is the peer's download, our push; its rx the peer's upload, the
answer) every millisecond while a round runs, and `LinkRound` holds, per direction, the bytes on
the wire (TCP/IP headers included, as the token bucket counts them) and the span in which the
middle 96% of them passed (2% to 98%: the connection's handshake, the headers and the last ack
are not the bulk transfer).

`DuplexServer` is the fair ceiling on the same kind of link: a raw socket that sends N bytes
while it receives N (scripts/bench/exchange/peer.py's `raw_server`), in a namespace of its own
behind a link shaped as the nodes' are; `duplex_round` is the bench's side of one exchange.

Used by scripts/bench/exchange/throughput.py only.
"""

from __future__ import annotations

import os
import resource
import socket
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT))

from scripts.bench.exchange.peer import HEAD, _both_ways, own_model, raw_inbox  # noqa: E402
from scripts.netlab.net import Link  # noqa: E402

PERIOD_S = 0.001  # counter sampling period: 1% of a 25 MB direction's 0.2 s at 1 Gbit/s
EDGE = 0.02  # a direction's span: from 2% of its bytes to 98% of them
DUPLEX_PORT = 7171
START_TIMEOUT_S = 60.0


@dataclass
class Direction:
    """One direction of one round: bytes on the wire, and when its bulk passed."""

    wire_bytes: int
    start: float  # seconds after the round began, at EDGE of its bytes
    end: float  # at 1 - EDGE of them
    last: float  # at the last of them

    @property
    def span(self) -> float:
        return self.end - self.start

    def share(self, payload: int, rate_bps: float) -> float:
        """The payload's rate in the bulk (the middle 1 - 2 * EDGE of it) as a share of the
        link: goodput, as a round's own figure is (the counters are no measure of the payload:
        a GSO packet counts its headers once, one the token bucket split counts them per
        segment)."""
        if self.span <= 0:
            return float("nan")
        return (1 - 2 * EDGE) * payload * 8 / self.span / rate_bps


@dataclass
class LinkRound:
    push: Direction  # to the peer (its download)
    answer: Direction  # from the peer (its upload)
    elapsed: float  # from `begin()` to `end()`: the round, as the meter saw it

    @property
    def overlap(self) -> float:
        """The share of the shorter direction's span during which the other one also ran."""
        a, b = self.push, self.answer
        both = min(a.end, b.end) - max(a.start, b.start)
        shorter = min(a.span, b.span)
        return max(0.0, both) / shorter if shorter > 0 else float("nan")


def _counters(dev: str) -> tuple[int, int]:
    base = Path("/sys/class/net") / dev / "statistics"
    return int((base / "tx_bytes").read_text()), int((base / "rx_bytes").read_text())


class LinkMeter:
    """Samples one host veth end's counters in a thread between `begin()` and `end()`."""

    def __init__(self, link: Link) -> None:
        self.dev = link.host_end
        self._samples: list[tuple[float, int, int]] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def begin(self) -> None:
        self._samples = [(time.perf_counter(), *_counters(self.dev))]
        self._stop.clear()
        self._thread = threading.Thread(target=self._sample, daemon=True, name="link-meter")
        self._thread.start()

    def _sample(self) -> None:
        while not self._stop.wait(PERIOD_S):
            self._samples.append((time.perf_counter(), *_counters(self.dev)))

    def end(self) -> LinkRound:
        self._stop.set()
        assert self._thread is not None
        self._thread.join()
        self._samples.append((time.perf_counter(), *_counters(self.dev)))
        t0 = self._samples[0][0]
        times = [t - t0 for t, _, _ in self._samples]
        tx = [s[1] - self._samples[0][1] for s in self._samples]
        rx = [s[2] - self._samples[0][2] for s in self._samples]
        return LinkRound(_direction(times, tx), _direction(times, rx), times[-1])


def _direction(times: list[float], total: list[int]) -> Direction:
    n = total[-1]
    lo, hi = EDGE * n, (1 - EDGE) * n
    last = _crossing(times, total, n)
    return Direction(n, _crossing(times, total, lo), _crossing(times, total, hi), last)


def _crossing(times: list[float], total: list[int], level: float) -> float:
    """When the cumulative count reached `level`, interpolated between two samples."""
    for i in range(1, len(total)):
        if total[i] >= level:
            before, after = total[i - 1], total[i]
            frac = (level - before) / (after - before) if after > before else 0.0
            return times[i - 1] + frac * (times[i] - times[i - 1])
    return times[-1]


class DuplexServer:
    """A raw duplex echo (peer.raw_server) in `link`'s namespace; always `close()` it."""

    def __init__(self, link: Link) -> None:
        self.addr = (link.ip, DUPLEX_PORT)
        command = ["ip", "netns", "exec", link.ns, sys.executable, __file__, "serve", link.ip]
        self.proc = subprocess.Popen(command, stdout=subprocess.PIPE, text=True, cwd=ROOT)
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()  # bounded by the child: it binds or exits
        if line.strip() != "ready":
            self.close()
            raise RuntimeError(f"duplex server in {link.ns} did not start: {line!r}")

    def cpu_seconds(self) -> float:
        fields = Path(f"/proc/{self.proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def close(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def duplex_round(server: DuplexServer, size: int) -> tuple[float, float]:
    """(seconds, CPU seconds of both processes) of one raw duplex exchange of `size` bytes each
    way, connect included as a node round's first request's is."""
    payload, answer = own_model(size), raw_inbox(size)
    cpu0 = _own_cpu() + server.cpu_seconds()
    t0 = time.perf_counter()
    with socket.create_connection(server.addr, timeout=START_TIMEOUT_S) as sock:
        sock.sendall(HEAD.pack(size, True))
        _both_ways(sock, payload, answer)
    wall = time.perf_counter() - t0
    return wall, _own_cpu() + server.cpu_seconds() - cpu0


def _own_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def serve(ip: str) -> None:
    from scripts.bench.exchange.peer import raw_server

    listener = socket.create_server((ip, DUPLEX_PORT))
    print("ready", flush=True)
    raw_server(listener)


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "serve":
        serve(sys.argv[2])
