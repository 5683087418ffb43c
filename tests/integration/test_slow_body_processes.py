"""Slow bodies against a real `swarmnode start` peer (issue 10), the attacker in its own process.

Before: 4 connections trickling a 19 KB body took the victim's 4 admission slots; it served 2
exchanges in 20 s instead of ~240, and a joiner could not sync from it (exit 2), with or without
a secret. Here 100 such connections (swarmnode.fault.hostile.SlowBodies, reconnecting whenever cut)
come from a separate process, as they would from another host, and:

- the honest exchange rate with the victim (signed push-pulls and pulls from this process) stays
  far above the attack's ~1% (asserted: >= 50%; printed, and measured at 94-97% on a quiet box:
  docs/benchmarks.md);
- a new peer joins through the victim and syncs its state from it while the attack goes on.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from swarmnode.gossip.auth.peer_key import PeerKey
from swarmnode.gossip.auth.signer import SIGNED_ROUTES, Signer
from swarmnode.gossip.auth.transport import AuthTransport
from swarmnode.gossip.errors import TransportError
from swarmnode.gossip.wire import frames as wire
from swarmnode.gossip.wire.control import encode_control
from swarmnode.node.net.transport import HttpTransport

from tests.integration.peers import ENV, HOLD, Peer

pytestmark = [pytest.mark.slow, pytest.mark.timeout(240)]

SECRET = "slow-body-secret"
MODEL = ["--model", "mlp:128"]  # a 38 KB frame: a 19 KB slow body is within the pushpull cap
WINDOW_S = 2.0
WINDOWS = 9  # 5 unattacked, 4 attacked
ROOT = Path(__file__).resolve().parents[2]

ATTACKER = """
import asyncio, sys
from swarmnode.fault.hostile import SlowBodies

async def main(addr, n):
    loop = asyncio.get_running_loop()
    while (await loop.run_in_executor(None, sys.stdin.readline)).strip() == "on":
        async with SlowBodies(addr, n) as slow:
            deadline = loop.time() + 30  # all n connections open, or the driver sees no "on"
            while slow.peak < n and loop.time() < deadline:
                await asyncio.sleep(0.05)
            print("on" if slow.peak >= n else f"only {slow.peak} of {n} connections", flush=True)
            await loop.run_in_executor(None, sys.stdin.readline)  # "off"
        print("off", flush=True)  # every connection closed

asyncio.run(main(sys.argv[1], int(sys.argv[2])))
"""


class Attacker:
    """The attacker process: `on()` returns once its n connections are open, `off()` once they
    are closed. One process for the whole test: its start-up (imports) stays out of the windows."""

    def __init__(self, addr: str, n: int = 100) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-c", ATTACKER, addr, str(n)],
            cwd=ROOT,
            env=ENV,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
        )

    def _say(self, word: str) -> None:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(word.encode() + b"\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        assert line.strip() == word.encode(), line + self.proc.stdout.read(2000)

    def on(self) -> None:
        self._say("on")

    def off(self) -> None:
        self._say("off")

    def stop(self) -> None:
        self.proc.kill()
        self.proc.wait(10)


def member_key(peer: Peer) -> PeerKey:
    """The key a `Peer` process keeps in its checkpoint dir: the honest client speaks as it
    (the model routes serve live members only, signed by their own keys)."""
    raw = (peer.dir / "ckpt" / "peer.key").read_text().strip()
    return PeerKey.from_private_bytes(bytes.fromhex(raw))


def _transport(key: PeerKey) -> AuthTransport:
    signer = Signer(SECRET, key=key, signed_routes=SIGNED_ROUTES, name="127.0.0.1:9")
    return AuthTransport(HttpTransport(), signer)


async def honest_rate(addr: str, size: int, seconds: float, key: PeerKey) -> tuple[int, list[str]]:
    """Signed push-pulls and pulls completed in `seconds`, one at a time; and the failures.
    `key`: a live member's (a request from a non-member is refused 403)."""
    transport = _transport(key)
    push = bytes(wire.encode_params(np.zeros(size, np.float32), sender=key.peer_id, step=1))
    pull = encode_control("pull", sender=key.peer_id)
    done, failed, end = 0, [], time.monotonic() + seconds
    try:
        while time.monotonic() < end:
            route, body = ("pushpull", push) if done % 2 == 0 else ("params", pull)
            try:
                await transport.request(addr, route, body, timeout=5.0)
                done += 1
            except TransportError as exc:
                failed.append(f"{route}: {exc}")
    finally:
        await transport.close()
    return done, failed


async def test_100_slow_bodies_from_another_process_do_not_stall_the_victim(tmp_path):
    victim = Peer(tmp_path, "victim", "--secret", SECRET, *MODEL, *HOLD).start(90)
    attacker = Attacker(victim.addr)
    # the honest client pushes as this real member (it only keeps the victim's table honest)
    member = Peer(tmp_path, "member", "--secret", SECRET, *MODEL, *HOLD, "--join", victim.addr)
    try:
        member.start(90)
        key = member_key(member)
        size = await _model_size(victim.addr, key)
        await honest_rate(victim.addr, size, 1.0, key)  # warm up
        # base, attack, base, ... : the shared box's load drifts by tens of percent over
        # seconds; many short alternating windows cancel most of it
        base, attacked, failed = [], [], []
        for i in range(WINDOWS):
            if i % 2:
                attacker.on()
            done, errors = await honest_rate(victim.addr, size, WINDOW_S, key)
            (attacked if i % 2 else base).append(done)
            failed += errors
            if i % 2:
                attacker.off()
        ratio = (sum(attacked) / len(attacked)) / (sum(base) / len(base))
        print(
            f"honest exchanges per {WINDOW_S:g} s window: {base} unattacked, {attacked} "
            f"attacked: {ratio:.0%} of the unattacked rate (issue 10's figure: >= 90%)"
        )
        assert failed == []
        # The attack, when it works, leaves ~1% (2 exchanges in 20 s instead of ~240). The
        # >= 90% figure is a measurement (printed above, quoted in docs/benchmarks.md), not a
        # timed assertion: the attacker's 100 connections share this small box's two cores
        # with the victim, so on a loaded CI machine the honest rate moves by tens of percent
        # for reasons that have nothing to do with slots being held.
        assert ratio >= 0.5, f"{attacked} under attack vs {base} without"
        # a peer joins through the victim and syncs its state from it, under attack; after the
        # windows, so that its start-up's CPU is not counted against the attacked rate
        attacker.on()
        joiner = Peer(tmp_path, "joiner", "--secret", SECRET, *MODEL, *HOLD,
                      "--join", victim.addr, "--join-timeout", "30")  # fmt: skip
        try:
            joiner.start(90)
        finally:
            joiner.stop()
            attacker.off()
    finally:
        attacker.stop()
        member.stop()
        victim.stop()


async def _model_size(addr: str, key: PeerKey) -> int:
    transport = _transport(key)
    try:
        answer = await transport.request(
            addr, "params", encode_control("pull", sender=key.peer_id), timeout=10
        )
    finally:
        await transport.close()
    _, vec = wire.decode_params(answer)
    return int(vec.size)
