"""What signatures cost on the gossip path, steady state (issue 10's target: at most 5%).

    .venv/bin/python scripts/bench/membership/signed_gossip.py [--members 16,256] [--rounds 240]

One receiving peer, `--members` owners on a virtual clock (0.5 s a round). Each round every
owner bumps its heartbeat and its training step (progress meta, as a training peer does every
0.25 s), and the receiver takes `--digests` digests (push-pull at fanout 3: ~6 an interval)
holding every owner's current entry: decode, parse, admit, verify, merge, then encodes its own
answer. Owners sign outside the timed part (in a swarm each pays for its own record once); the
receiver's own signing is inside it. Four schemes:

- unsigned: the plain 7-field entries (the in-process simulation's form);
- per-beat: every heartbeat a freshly signed record (the 2026-11-24 branch: one Ed25519
  verification per member per interval);
- chain-uncached: the record signed once, heartbeats on its hash chain, progress re-signed
  every `--progress-reseal` s (default: the peers' own, `records.PROGRESS_RESEAL_S`), every entry's record opened afresh (before 2026-11-24's
  `RecordOpener`);
- chain: the same, with records opened once and remembered by their bytes (`RecordOpener`);

Prints gossip CPU per interval (ms and % of a core) and the share spent in sign and verify,
twice: timed around `Verifier.check` and our own `RecordSigner.entry` (inflated by the timers'
own cost), and as operation counts x unit costs measured in tight loops.
"""

from __future__ import annotations

import argparse
import time

from swarmnode.gossip.auth.peer_key import PeerKey, verify_signature
from swarmnode.gossip.link.inmemory import InMemoryNetwork
from swarmnode.gossip.membership.entries import Gossiped
from swarmnode.gossip.membership.records import (
    CHAIN_LENGTH,
    PROGRESS_RESEAL_S,
    RecordSigner,
    Verifier,
    chain_step,
    open_entry,
    seal,
    to_wire,
)
from swarmnode.gossip.membership.service import Membership, MembershipConfig
from swarmnode.gossip.wire.control import decode_control, encode_control

INTERVAL_S = 0.5
SCHEMES = ("unsigned", "per-beat", "chain-uncached", "chain")


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class TimedVerifier(Verifier):
    def __init__(self) -> None:
        super().__init__()
        self.spent = 0.0

    def check(self, g, held=None, held_heartbeat=0):  # type: ignore[no-untyped-def]
        t0 = time.process_time()
        try:
            return super().check(g, held, held_heartbeat)
        finally:
            self.spent += time.process_time() - t0


def run(n: int, rounds: int, digests: int, scheme: str, reseal_s: float) -> dict[str, float]:
    clock = Clock()
    signed = scheme != "unsigned"
    me = PeerKey.generate()
    m = Membership(
        me.peer_id if signed else "me",
        "10.0.0.1:1",
        InMemoryNetwork().transport("10.0.0.1:1"),
        MembershipConfig(max_digest=4096, max_members_per_host=1 << 20),  # one relayer: no cap
        key=me if signed else None,
        clock=clock,
    )
    if signed:
        m.verifier = m.intake.verifier = TimedVerifier()
        if scheme == "chain-uncached":
            m.intake._open = open_entry
        own = RecordSigner(me, clock=clock)
        own_spent = [0.0]

        def timed_entry(g: Gossiped) -> Gossiped:
            t0 = time.process_time()
            try:
                return own.entry(g)
            finally:
                own_spent[0] += time.process_time() - t0

        m.table._seal = timed_entry
    keys = [PeerKey.generate() for _ in range(n)]
    signers = [RecordSigner(k, clock=clock, progress_reseal_s=reseal_s) for k in keys]
    total = 0.0
    for r in range(rounds):
        clock.now += INTERVAL_S
        m.table.bump()
        m.table.set_meta({"step": r, "name": "me"})
        entries = []
        for i, k in enumerate(keys):
            g = Gossiped(
                k.peer_id if signed else f"p{i}",
                f"10.1.{i // 250}.{i % 250}:1",
                1,
                r + 1,
                "alive",
                0.0,
                {"step": r * 10, "loss": 0.5, "acc": 0.9, "name": f"p{i}"},
            )
            if scheme.startswith("chain"):
                g = signers[i].entry(g)
            elif scheme == "per-beat":
                g = seal(g, k)
            entries.append(to_wire(g))
        bodies = [encode_control("gossip", sender=f"s{d}", members=entries) for d in range(digests)]
        t0 = time.process_time()
        for body in bodies:
            m._merge(decode_control(body, "gossip"), "gossip", "10.1.0.0")
            encode_control(
                "gossip-ack", sender="me", members=[to_wire(g) for g in m.table.digest(clock.now)]
            )
        total += time.process_time() - t0
    assert len(m.table) == n, (scheme, len(m.table))
    crypto = (m.verifier.spent + own_spent[0]) if signed else 0.0  # type: ignore[union-attr]
    return {
        "ms_per_interval": total / rounds * 1e3,
        "core_pct": total / rounds / INTERVAL_S * 100,
        "crypto_pct_of_gossip": 100 * crypto / total,
        "verifies_per_interval": (m.verifier.verified / rounds) if signed else 0.0,  # type: ignore[union-attr]
        "hashes_per_interval": (m.verifier.hashed / rounds) if signed else 0.0,  # type: ignore[union-attr]
        "own_signs_per_interval": (own.signed / rounds) if signed else 0.0,
    }


def unit_costs() -> dict[str, float]:
    """CPU seconds of one Ed25519 verify, one sign, one chain step (tight loops)."""
    key = PeerKey.generate()
    data = bytes(300)
    sig = key.sign(data)
    out = {}
    for name, fn, n in (
        ("verify", lambda: verify_signature(key.public, sig, data), 2000),
        ("sign", lambda: key.sign(data), 2000),
        ("hash", lambda: chain_step(data[:32]), 200000),
    ):
        t0 = time.process_time()
        for _ in range(n):
            fn()
        out[name] = (time.process_time() - t0) / n
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--members", default="16,256")
    ap.add_argument("--rounds", type=int, default=240)
    ap.add_argument("--digests", type=int, default=6)
    ap.add_argument(
        "--progress-reseal",
        type=float,
        default=PROGRESS_RESEAL_S,
        help="owners' progress re-sign period, s (default: %(default)s, the peers' own)",
    )
    args = ap.parse_args()
    unit = unit_costs()
    print(
        f"unit costs: Ed25519 verify {unit['verify'] * 1e6:.0f} us, sign {unit['sign'] * 1e6:.0f} us,"
        f" chain step {unit['hash'] * 1e6:.2f} us",
        flush=True,
    )
    for n in (int(x) for x in args.members.split(",")):
        base = None
        totals, counts = {}, {}
        for scheme in SCHEMES:
            r = run(n, args.rounds, args.digests, scheme, args.progress_reseal)
            base = base or r["ms_per_interval"]
            totals[scheme] = r["ms_per_interval"]
            print(
                f"{n:5d} members  {scheme:14s} {r['ms_per_interval']:8.2f} ms/interval "
                f"({r['core_pct']:5.1f}% of a core, x{r['ms_per_interval'] / base:.2f})  "
                f"sign+verify {r['crypto_pct_of_gossip']:5.1f}% of it, "
                f"{r['verifies_per_interval']:.2f} Ed25519 verifies/interval",
                flush=True,
            )
            counts[scheme] = r
        # the timers around each check inflate the share above: count x unit cost does not
        for scheme in SCHEMES[1:]:
            c = counts[scheme]
            crypto = (
                c["verifies_per_interval"] * unit["verify"]
                + c["hashes_per_interval"] * unit["hash"]
                + c["own_signs_per_interval"] * (unit["sign"] + CHAIN_LENGTH * unit["hash"])
            ) * 1e3
            if scheme == "per-beat":  # every beat a new record: one sign, no chain kept
                crypto = (c["verifies_per_interval"] * unit["verify"] + unit["sign"]) * 1e3
            print(
                f"{n:5d} members  {scheme}: sign+verify by count x unit cost {crypto:.3f} "
                f"ms/interval = {100 * crypto / totals[scheme]:.1f}% of its gossip CPU",
                flush=True,
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
