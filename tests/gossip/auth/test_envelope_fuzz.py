"""Issue 32, item 5: 10,000 mutated v5 envelopes, every one refused with an `AuthError` (or,
where the mutation changed nothing, opened to the very body that was sealed), never a crash.

Each mutant is opened both ways a peer opens one: whole (`open_request`: small bodies, answers)
and streamed (`open_head` on its first bytes with the declared total, then `open_body`: a large
push, node/net/app.py). Mutations aim at the head, the body, the trailer and the seams between
them: flipped bits, overwritten bytes, cuts, extensions, a name length or the signed body length
that lies, another envelope's head, body or trailer spliced in, and random garbage. A fresh
opener (its own replay window) opens each mutant, so that a head left intact still reaches the
body and trailer checks."""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Callable

import pytest
from swarmnode.gossip.auth import signer as auth
from swarmnode.gossip.auth.peer_key import PeerKey
from swarmnode.gossip.auth.signer import SIGNED_ROUTES, TRAILER_BYTES, Signer, header_length
from swarmnode.gossip.errors import AuthError

pytestmark = pytest.mark.timeout(300)

MUTANTS = 10_000
NOW = 1_700_000_000.0
A, B = PeerKey.generate(), PeerKey.generate()
ROUTE = "pushpull"


def sealer(secret: str | None) -> Signer:
    return Signer(secret, key=A, signed_routes=SIGNED_ROUTES, name="a:1", clock=lambda: NOW)


def opener(secret: str | None) -> Signer:
    keys = {A.peer_id: A.public}.get
    return Signer(
        secret, key=B, keys=keys, signed_routes=SIGNED_ROUTES, name="b:1", clock=lambda: NOW
    )


Mutation = Callable[[random.Random, bytes, bytes], bytes]


def _flip(rng: random.Random, m: bytes, _other: bytes) -> bytes:
    out = bytearray(m)
    for _ in range(rng.randint(1, 4)):
        out[rng.randrange(len(out))] ^= 1 << rng.randrange(8)
    return bytes(out)


def _flip_at_seam(rng: random.Random, m: bytes, _other: bytes) -> bytes:
    """A byte next to a boundary: the names, the length, the head's tag, body, trailer."""
    head, end = header_length(m), len(m) - TRAILER_BYTES
    seams = [auth.FIXED_BYTES, head - auth.HEAD_AUTH_BYTES - 9, head - 96, head, end, end + 32]
    out = bytearray(m)
    at = min(len(out) - 1, max(0, rng.choice(seams) + rng.randint(-2, 2)))
    out[at] ^= 1 << rng.randrange(8)
    return bytes(out)


def _overwrite(rng: random.Random, m: bytes, _other: bytes) -> bytes:
    at = rng.randrange(len(m))
    n = rng.randint(1, 64)
    return m[:at] + rng.randbytes(n) + m[at + n :]


def _cut(rng: random.Random, m: bytes, _other: bytes) -> bytes:
    return m[: rng.randrange(len(m))]


def _extend(rng: random.Random, m: bytes, _other: bytes) -> bytes:
    at = rng.choice([len(m), len(m) - TRAILER_BYTES, header_length(m), rng.randrange(len(m))])
    return m[:at] + rng.randbytes(rng.randint(1, 300)) + m[at:]


def _name_lies(rng: random.Random, m: bytes, _other: bytes) -> bytes:
    out = bytearray(m)
    pos = auth.FIXED_BYTES
    for _ in range(rng.randrange(3)):
        pos += 1 + out[pos]
    out[pos] = rng.randrange(256)
    return bytes(out)


def _length_lies(rng: random.Random, m: bytes, _other: bytes) -> bytes:
    at = header_length(m) - auth.HEAD_AUTH_BYTES - auth.SIGNED_TAIL_BYTES
    value = rng.choice([0, 1, 2**63, 2**64 - 1, rng.randrange(2**40)])
    declared = int.from_bytes(m[at : at + 8], "big") + rng.choice([-1, 1, value])
    return m[:at] + (declared % 2**64).to_bytes(8, "big") + m[at + 8 :]


def _splice(rng: random.Random, m: bytes, other: bytes) -> bytes:
    """Another envelope's head, body or trailer (the same signer, route and receiver)."""
    hm, ho = header_length(m), header_length(other)
    part = rng.choice(["head", "body", "trailer"])
    if part == "head":
        return other[:ho] + m[hm:]
    if part == "body":
        return m[:hm] + other[ho:-TRAILER_BYTES] + m[-TRAILER_BYTES:]
    return m[:-TRAILER_BYTES] + other[-TRAILER_BYTES:]


def _garbage(rng: random.Random, m: bytes, _other: bytes) -> bytes:
    keep = rng.choice([0, 4, auth.FIXED_BYTES])  # the magic (and more) kept, or not
    return m[:keep] + rng.randbytes(rng.randint(0, 2 * len(m)))


MUTATIONS: list[Mutation] = [
    _flip,
    _flip_at_seam,
    _overwrite,
    _cut,
    _extend,
    _name_lies,
    _length_lies,
    _splice,
    _garbage,
]


def _open_whole(o: Signer, data: bytes) -> bytes:
    return bytes(o.open_request(ROUTE, data, arrived="b:1").body)


def _open_streamed(o: Signer, data: bytes) -> bytes:
    """As a large push is opened: the head from the first bytes the transport holds."""
    first = data[: auth.MAX_HEADER_BYTES]
    head = o.open_head(ROUTE, first, total=len(data), arrived="b:1")
    return bytes(o.open_body(head, data).body)


@pytest.mark.parametrize("secret", ["s3cret", None], ids=["secret", "open"])
def test_ten_thousand_mutated_envelopes_never_crash_the_opener(secret: str | None) -> None:
    rng = random.Random(32)
    outcomes: Counter[str] = Counter()
    bodies = [rng.randbytes(rng.choice([0, 1, 200, 3000])) for _ in range(8)]
    for i in range(MUTANTS // 2):  # each of the two swarms' kinds: 10,000 in all
        if i % 50 == 0:  # fresh originals now and then (new nonces, lengths)
            body, other_body = rng.choice(bodies), rng.choice(bodies)
            original = bytes(sealer(secret).seal(ROUTE, body, to="b:1"))
            other = bytes(sealer(secret).seal(ROUTE, other_body, to="b:1"))
        mutation = rng.choice(MUTATIONS)
        mutant = mutation(rng, original, other)
        outcomes["changed"] += mutant != original  # a splice of equal bodies changes nothing
        for way, open_ in (("whole", _open_whole), ("streamed", _open_streamed)):
            try:
                opened = open_(opener(secret), mutant)
            except AuthError:
                outcomes[f"{way} refused"] += 1
                continue
            except Exception as exc:  # what this test counts: anything but a refusal
                pytest.fail(f"{mutation.__name__} crashed the {way} opener: {exc!r}")
            # only a mutation that changed nothing may open, and only to the body sealed
            assert mutant == original and opened == body, f"{mutation.__name__} opened"
            outcomes[f"{way} opened unchanged"] += 1
    changed = outcomes.pop("changed")
    assert sum(outcomes.values()) == MUTANTS  # 5,000 mutants, each opened both ways
    assert outcomes["whole refused"] == outcomes["streamed refused"] == changed > 0.98 * MUTANTS / 2
