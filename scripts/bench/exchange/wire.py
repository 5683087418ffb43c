#!/usr/bin/env python
"""Parameter payload throughput: checksums, and a 100 MB exchange against raw loopback TCP.

    .venv/bin/python scripts/bench/exchange/wire.py              # 100 MB (25M float32)
    .venv/bin/python scripts/bench/exchange/wire.py --mb 400

1. Checksum candidates over the payload (GB/s): why `swarmnode.gossip.wire.frames` uses xxh3.
2. Raw: `sendall` of the float32 buffer over a loopback socket into a preallocated buffer.
   End to end: `encode_params` -> send -> receive -> `decode_params` -> `validate_params` (and
   the same with `swarmnode.gossip.auth.signer` sealing/opening around it). Target: end to end >= 50% of raw.
"""

from __future__ import annotations

import argparse
import hashlib
import socket
import statistics
import sys
import threading
import time
import zlib
from collections.abc import Callable
from typing import Any

import numpy as np
import xxhash
from swarmnode.gossip.auth.signer import Signer
from swarmnode.gossip.wire import frames as wire


def best_of(fn: Callable[[], Any], repeats: int) -> float:
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def checksums(payload: memoryview, repeats: int) -> None:
    print(f"{'checksum':<14}{'GB/s':>8}")
    candidates = {
        "xxh3 (used)": lambda: xxhash.xxh3_64_digest(payload),
        "zlib.crc32": lambda: zlib.crc32(payload),
        "zlib.adler32": lambda: zlib.adler32(payload),
        "sha256": lambda: hashlib.sha256(payload).digest(),
        "blake2b": lambda: hashlib.blake2b(payload).digest(),
    }
    for name, fn in candidates.items():
        print(f"{name:<14}{len(payload) / best_of(fn, repeats) / 1e9:>8.2f}")


class Receiver:
    """A loopback server: reads one length-prefixed message per connection, runs `process`."""

    def __init__(self, process: Callable[[memoryview], None]) -> None:
        self.process = process
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.addr = self.sock.getsockname()
        self.error: BaseException | None = None

    def serve_once(self) -> threading.Thread:
        thread = threading.Thread(target=self._serve, daemon=True)
        thread.start()
        return thread

    def _serve(self) -> None:
        conn, _ = self.sock.accept()
        with conn:
            try:
                size = int.from_bytes(_recv_exact(conn, 8), "big")
                buf = np.empty(size, dtype=np.uint8)  # huge pages, like the sender's buffer
                view = memoryview(buf)
                got = 0
                while got < size:
                    got += conn.recv_into(view[got:], min(size - got, 1 << 22))
                self.process(view)
            except BaseException as exc:  # reported by the client side
                self.error = exc
            conn.sendall(b"k")


def _recv_exact(conn: socket.socket, n: int) -> bytes:
    data = b""
    while len(data) < n:
        chunk = conn.recv(n - len(data))
        if not chunk:
            raise ConnectionError("peer closed")
        data += chunk
    return data


def one_transfer(receiver: Receiver, make_message: Callable[[], Any]) -> float:
    thread = receiver.serve_once()
    t0 = time.perf_counter()
    message = make_message()
    with socket.create_connection(receiver.addr) as conn:
        conn.sendall(len(message).to_bytes(8, "big"))
        conn.sendall(message)
        if conn.recv(1) != b"k":
            raise ConnectionError("no ack")
    elapsed = time.perf_counter() - t0
    thread.join()
    if receiver.error is not None:
        raise receiver.error
    return elapsed


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--mb", type=float, default=100.0, help="payload size in MB (1e6 bytes)")
    p.add_argument("--repeats", type=int, default=5)
    args = p.parse_args(argv)
    size = int(args.mb * 1e6) // 4
    vec = np.random.default_rng(0).standard_normal(size, dtype=np.float32)
    raw = memoryview(vec).cast("B")
    checksums(raw, 3)

    signer_a, signer_b = Signer("bench-secret"), Signer("bench-secret")

    def receive_raw(view: memoryview) -> None:
        pass

    def receive_params(view: memoryview) -> None:
        _, out = wire.decode_params(view, expected_size=size)
        wire.validate_params(out, size)

    def receive_sealed(view: memoryview) -> None:
        receive_params(signer_b.open("params", view))

    cases = [
        ("raw loopback sendall", receive_raw, lambda: raw),
        ("wire end to end", receive_params, lambda: wire.encode_params(vec, sender="a", step=1)),
        (
            "wire + HMAC end to end",
            receive_sealed,
            lambda: signer_a.seal("params", wire.encode_params(vec, sender="a", step=1)),
        ),
    ]
    print(f"\n{len(raw) / 1e6:.0f} MB over loopback TCP, median of {args.repeats}")
    print(f"{'case':<26}{'time':>10}{'GB/s':>8}{'vs raw':>9}")
    raw_time = None
    for label, process, make in cases:
        receiver = Receiver(process)
        one_transfer(receiver, make)  # warm-up
        t = statistics.median(one_transfer(receiver, make) for _ in range(args.repeats))
        receiver.sock.close()
        raw_time = raw_time or t
        print(f"{label:<26}{t * 1000:>8.0f}ms{len(raw) / t / 1e9:>8.2f}{raw_time / t:>8.0%}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
