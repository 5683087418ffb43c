"""Envelopes around requests: a swarm secret's HMAC, a member key's Ed25519 signature, or both.

One layout (version 5) for every enveloped message: a head authenticated on its own, then the
body, then a trailer that authenticates the body.

    [4 bytes MAGIC] [8 bytes timestamp, ms, big-endian] [16 bytes random nonce]
    [1 byte len | sender address] [1 byte len | receiver] [1 byte len | signer peer id]
    [8 bytes body length] [1 byte digest algorithm]                       <- what the head signs
    [32 bytes head tag] [64 bytes head signature]                         <- the head ends here
    [body: exactly `body length` bytes]
    [32 bytes body digest D] [32 bytes tag] [64 bytes signature]          <- TRAILER_BYTES, fixed

    H   = HEAD_DOMAIN | len(route) | route | len(reply_to) | reply_to | (timestamp .. algorithm)
    head tag = HMAC-SHA256(secret, H),  head sig = Ed25519(signer's peer key, H)
    D   = BLAKE3(everything between MAGIC and the trailer: the whole head, then the body)
    T   = DOMAIN | len(route) | route | len(reply_to) | reply_to | len(what D covers) | D
    tag = HMAC-SHA256(secret, T),       sig = Ed25519(signer's peer key, T)
    (a tag is zeros in a swarm without a secret; a signature zeros where no member signs:
    answers, control)

- Why a head of its own (v5): a receiver verifies who sent a message, to whom, on which route
  and when, before it reads one byte of the body, and can start its answer while a 100 MB push
  still arrives (node/net/app.py, gossip/auth/transport.py). The head signs the body's *length*
  and *digest algorithm*, not its digest, which only exists once the body is out; the trailer
  carries D and signs it bound to the head (D covers the head, nonce and signatures included):
  a verified head followed by another body, or a valid trailer after another head, fails at
  the trailer. Nothing of the body is mixed, answered or kept until D and T check out.
- The declared length is signed, so a Content-Length that disagrees with it is refused at the
  head; the algorithm is signed, so it cannot be downgraded (one is defined: BLAKE3-256).
- The route is bound, so a sealed `gossip` request cannot be replayed against `pushpull`.
- The receiver is bound: a request names the address it is sent to ("host:port", exactly what
  the sender dials) and a peer opens only requests addressed to one of its own names (its
  advertised address, or the address the request arrived at: `Arrival.local`, set by the
  transport). So a request captured on its way to one peer is refused by every other peer.
- Who sent it: `sender` is the signer's advertised address (for logs); with one shared secret
  the tag proves swarm membership, not identity. On the routes that hand out or move a model
  (`params`, `pushpull`: `SIGNED_ROUTES`) every request is also signed by the sender's Ed25519
  peer key, in every admission mode, and opened only if `keys(signer id)` (the member table:
  alive or suspect members' keys from their signed records) verifies it: 403 for an id that
  is no live member, 401 for a bad signature. The handler then sees the signer in its
  `Arrival.signed_by`; the exchange refuses a declared `sender` that differs.
- `reply_to` is the request's nonce when a response is sealed, so an answer cannot be swapped
  for another answer, nor a request reflected back as an answer.
- D is BLAKE3 (collision resistant: a member's signature over a digest must not transfer to
  another body; xxh3 would not do). A sender hashes a large body while the transport writes it
  (`seal_streamed`, gossip/auth/seal_stream.py) and a receiver while it streams in
  (`gossip.auth.stream_digest`, fed by the HTTP transports). Neither side copies the body.
- `open_head` checks the length caps, the magic, the head tag (in constant time) and the head
  signature, the receiver, then the `ReplayGuard` (the timestamp against the clock skew, the
  nonce against those seen in that window: a head replayed with another body is refused here,
  and only verified heads take a place in the window); `open_body` then checks D and the
  trailer's tag and signature. Unauthenticated bytes never reach msgpack. Another envelope
  version is refused with one line that names both.

A message replayed verbatim is rejected by the guard; a replay with a changed body, route,
names or timestamp fails the tags and the signatures. Without a secret only the signed routes
are enveloped (see `node/peer/node.py`); their answers travel bare.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import os
import time
from collections.abc import Callable, Collection
from typing import Any, NamedTuple

import blake3
import numpy as np
from swarmnode.gossip.auth.peer_key import SIGNATURE_BYTES, PeerKey, verify_signature
from swarmnode.gossip.auth.read_token import read_token
from swarmnode.gossip.auth.replay import MAX_NONCES, MAX_SKEW_S, ClockSkew, ReplayGuard
from swarmnode.gossip.auth.seal_stream import StreamedSeal
from swarmnode.gossip.auth.skew_witness import SkewWitnesses
from swarmnode.gossip.auth.stream_digest import StreamDigest
from swarmnode.gossip.errors import (
    AuthError,
    EnvelopeSkew,
    NotAMember,
    UnauthenticatedRequest,
    UnauthenticatedResponse,
)
from swarmnode.gossip.link import Parts, Trailed
from swarmnode.gossip.wire import mark as mark_covered

VERSION = 5
MAGIC = b"SNA5"
MAGIC_BYTES = len(MAGIC)
DOMAIN = b"swarmnode/auth/v5\x00"  # the trailer's transcript
HEAD_DOMAIN = b"swarmnode/auth/v5/head\x00"  # the head's: a head signature is no trailer's
TAG_BYTES = 32
DIGEST_BYTES = 32
DIGEST_BLAKE3 = 1  # the one body digest algorithm defined (BLAKE3-256)
TRAILER_BYTES = DIGEST_BYTES + TAG_BYTES + SIGNATURE_BYTES
NONCE_BYTES = 16
FIXED_BYTES = MAGIC_BYTES + 8 + NONCE_BYTES  # the names start here
LENGTH_BYTES = 8
SIGNED_TAIL_BYTES = LENGTH_BYTES + 1  # after the names: body length, digest algorithm
HEAD_AUTH_BYTES = TAG_BYTES + SIGNATURE_BYTES  # the head's own tag and signature
# the shortest head: empty sender, receiver and signer
HEADER_BYTES = FIXED_BYTES + 3 + SIGNED_TAIL_BYTES + HEAD_AUTH_BYTES
MAX_NAME_BYTES = 255
MAX_HEADER_BYTES = HEADER_BYTES + 3 * MAX_NAME_BYTES
MAX_OVERHEAD_BYTES = MAX_HEADER_BYTES + TRAILER_BYTES  # what an envelope adds to a body, at most
MAX_BODY_BYTES = (1 << 30) + (1 << 20)  # a 1 GiB parameter payload plus its frame
# The routes whose requests a member's key must sign: they hand out or move a model.
SIGNED_ROUTES = frozenset({"params", "pushpull"})
# Bodies up to this size are sealed/opened inline and returned as `bytes`; larger ones are
# hashed in a worker thread (several, to seal) and opened as memoryviews (no copy).
INLINE_BYTES = 1 << 20
_ZERO_TAG, _ZERO_SIG = bytes(TAG_BYTES), bytes(SIGNATURE_BYTES)

log = logging.getLogger(__name__)

__all__ = [
    "MAX_NONCES",
    "MAX_SKEW_S",
    "AuthError",
    "ClockSkew",
    "NotAMember",
    "ReplayGuard",
    "Signer",
    "UnauthenticatedRequest",
    "UnauthenticatedResponse",
]


class Opened(NamedTuple):
    body: bytes | memoryview
    nonce: bytes
    signed_by: str  # the member whose key signed the request; "" when none had to


class Head(NamedTuple):
    """A verified envelope head (`Signer.open_head`): what `open_body` needs to finish."""

    route: str
    reply_to: bytes
    nonce: bytes
    signed_by: str  # the member whose key signed the head ("" where none had to)
    public: bytes | None  # that member's key, as it verified the head: it must sign the trailer
    sender: str  # the declared sender address, for logs only
    length: int  # bytes of the head
    body_length: int  # bytes of the body, as the head declares and signs


class Signer:
    """Seals and opens envelopes for one peer. One per peer: it owns the replay guard.

    `secret`: the swarm secret (every message gets a tag), or None (open/trust admission: only
    `SIGNED_ROUTES` are enveloped). `key`: this peer's Ed25519 key, which signs its requests on
    `signed_routes`; `keys(peer_id)` gives a live member's public key (None otherwise) to check
    theirs. `name` is this peer's advertised address: it signs as that sender and opens
    requests addressed to it (or to where they arrived, `Arrival.local`). An unnamed signer (a
    tool, a test) opens only requests addressed to nobody, which no peer ever sends.
    """

    def __init__(
        self,
        secret: str | bytes | None,
        *,
        name: str = "",
        key: PeerKey | None = None,
        keys: Callable[[str], bytes | None] | None = None,
        signed_routes: Collection[str] = (),
        max_body_bytes: int = MAX_BODY_BYTES,
        guard: ReplayGuard | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        if secret is not None:
            secret = secret.encode() if isinstance(secret, str) else bytes(secret)
            if not secret:
                raise AuthError("the swarm `secret` must not be empty")
        elif key is None:
            raise AuthError("a Signer needs a swarm `secret`, a peer key, or both")
        self._secret = secret
        self.key = key
        self.keys = keys
        self.signed_routes = frozenset(signed_routes)
        self.name = name
        self.max_body_bytes = max_body_bytes
        self.clock = clock
        self.guard = guard if guard is not None else ReplayGuard(clock=clock)
        self.skews = SkewWitnesses()  # who was off our clock; witnesses: key-proven only

    @property
    def has_secret(self) -> bool:
        return self._secret is not None

    def read_token(self) -> str | None:
        """The swarm's read token (gossip/auth/read_token.py); None without a secret."""
        return None if self._secret is None else read_token(self._secret)

    def wraps(self, route: str) -> bool:
        """Whether requests on `route` travel in an envelope (answers: only with a secret)."""
        return self._secret is not None or route in self.signed_routes

    def tap(self, route: str = "") -> StreamDigest | None:
        """A streaming digest for a large envelope about to arrive on `route` (None where
        requests are not enveloped: nothing would use the digest)."""
        if route and not self.wraps(route):
            return None
        return StreamDigest(MAGIC_BYTES, offset_of=header_length, tail=TRAILER_BYTES)

    # --- sealing -------------------------------------------------------------------------

    def seal_parts(self, route: str, body: Any, *, to: str = "", reply_to: bytes = b"") -> Parts:
        """`body` (any bytes-like) in an envelope for `route` on peer `to`, hashed at once, as
        three buffers: head, body (the body itself, not a copy: keep it unchanged until sent)
        and trailer. Large bodies that go out over a socket take `seal_streamed`."""
        head, view, trailer = self._begin(route, body, to, reply_to)
        hasher = blake3.blake3(max_threads=blake3.blake3.AUTO if len(view) > INLINE_BYTES else 1)
        hasher.update(head[MAGIC_BYTES:])
        hasher.update(view)
        return Parts(head, view, trailer(hasher.digest()))

    def seal_streamed(
        self, route: str, body: Any, *, to: str = "", reply_to: bytes = b""
    ) -> StreamedSeal:
        """The same envelope (the same bytes as `seal_parts` for the same clock and nonce),
        hashed while the transport writes it: its trailer is computed once the body is out."""
        head, view, trailer = self._begin(route, body, to, reply_to)
        return StreamedSeal(head, view, skip=MAGIC_BYTES, tail_bytes=TRAILER_BYTES, finish=trailer)

    def _begin(
        self, route: str, body: Any, to: str, reply_to: bytes
    ) -> tuple[bytes, memoryview, Callable[[bytes], bytes]]:
        """The head (magic to its signature), the body as bytes, and how to make the trailer
        from D."""
        view = _bytes_view(body)
        if len(view) > self.max_body_bytes:
            raise AuthError(f"body of {len(view)} bytes exceeds the {self.max_body_bytes}-byte cap")
        signs = not reply_to and route in self.signed_routes and self.key is not None
        signer = _name(self.key.peer_id) if signs else b""  # type: ignore[union-attr]
        sender, receiver = (b"", b"") if reply_to else (_name(self.name), _name(to))
        ts = int(self.clock() * 1000).to_bytes(8, "big")
        signed = b"".join(
            (
                MAGIC,
                ts,
                os.urandom(NONCE_BYTES),
                _lv(sender),
                _lv(receiver),
                _lv(signer),
                len(view).to_bytes(LENGTH_BYTES, "big"),
                bytes((DIGEST_BLAKE3,)),
            )
        )
        head = signed + self._authenticate(_head_transcript(route, reply_to, signed), signs)
        covered = len(head) - MAGIC_BYTES + len(view)

        def trailer(d: bytes) -> bytes:
            return d + self._authenticate(_transcript(route, reply_to, covered, d), signs)

        return head, view, trailer

    def _authenticate(self, transcript: bytes, signs: bool) -> bytes:
        """Tag and signature over a transcript (zeros for what this message does not use)."""
        secret = self._secret
        tag = hmac.new(secret, transcript, hashlib.sha256).digest() if secret else _ZERO_TAG
        sig = self.key.sign(transcript) if signs else _ZERO_SIG  # type: ignore[union-attr]
        return tag + sig

    def seal(
        self, route: str, body: Any, *, to: str = "", reply_to: bytes = b""
    ) -> bytes | memoryview:
        """The same envelope in one buffer (tools and tests; peers send `seal_parts`)."""
        parts = self.seal_parts(route, body, to=to, reply_to=reply_to)
        if len(parts) <= INLINE_BYTES:
            return bytes(parts)
        out = np.empty(len(parts), dtype=np.uint8)  # huge pages: ~15 ms per 100 MB, not ~85
        pos = 0
        for buf in parts:
            out[pos : pos + len(buf)] = np.frombuffer(buf, np.uint8)
            pos += len(buf)
        return memoryview(out)

    # --- opening -------------------------------------------------------------------------

    def open(self, route: str, data: Any, *, reply_to: bytes = b"") -> bytes | memoryview:
        """The body of an envelope sealed for `route`; `AuthError` unless authentic and fresh."""
        return self.open_request(route, data, reply_to=reply_to).body

    def unseal(
        self, route: str, data: Any, *, reply_to: bytes = b""
    ) -> tuple[bytes | memoryview, bytes]:
        """(body, nonce) of an envelope; the nonce is what a response's `reply_to` binds to."""
        opened = self.open_request(route, data, reply_to=reply_to)
        return opened.body, opened.nonce

    def open_request(
        self,
        route: str,
        data: Any,
        *,
        reply_to: bytes = b"",
        digest: bytes | None = None,
        arrived: str = "",
    ) -> Opened:
        """Check an envelope; `digest`, if given, is BLAKE3 of what it covers (between magic
        and trailer) computed while it arrived (a tap's), saving the second pass. A request (no
        `reply_to`) must be addressed to this peer (`accepts`; `arrived`: the "host:port" it
        came in on) and, on a signed route, signed by a live member."""
        view = _bytes_view(data)
        head = self.open_head(route, view, total=len(view), reply_to=reply_to, arrived=arrived)
        return self.open_body(head, view, digest=digest)

    def open_head(
        self,
        route: str,
        data: Any,
        *,
        total: int,
        reply_to: bytes = b"",
        arrived: str = "",
    ) -> Head:
        """Verify an envelope's head from its first bytes (`data`: at least the head; `total`:
        the whole message's length, as the transport declared it) before any of the body is
        read: who signed it, for whom, for which route, when, and how long its body is.
        `AuthError` (`EnvelopeSkew`, `NotAMember`, `ClockSkew`) unless authentic and fresh."""
        view = _bytes_view(data)
        if len(view) >= MAGIC_BYTES:  # another version is named whatever its length
            _check_magic(view)
        if total < HEADER_BYTES + TRAILER_BYTES:
            raise AuthError(f"message of {total} bytes is too short to be authenticated")
        if total - HEADER_BYTES - TRAILER_BYTES > self.max_body_bytes + 3 * MAX_NAME_BYTES:
            raise AuthError(f"message of {total} bytes exceeds the authentication cap")
        sender, pos = _read_lv(view, FIXED_BYTES)
        receiver, pos = _read_lv(view, pos)
        signer, pos = _read_lv(view, pos)
        signed_end = pos + SIGNED_TAIL_BYTES
        length = signed_end + HEAD_AUTH_BYTES
        if len(view) < length:
            raise AuthError("message is too short to be authenticated")
        body_length = int.from_bytes(view[pos : pos + LENGTH_BYTES], "big")
        algorithm = view[pos + LENGTH_BYTES]
        h = _head_transcript(route, reply_to, view[:signed_end])
        # a field this swarm does not use must be zeros: no byte of an envelope is malleable
        tag = hmac.new(self._secret, h, hashlib.sha256).digest() if self._secret else _ZERO_TAG
        if not hmac.compare_digest(tag, view[signed_end : signed_end + TAG_BYTES]):
            raise AuthError("bad message authentication code (wrong secret, or altered)")
        sig_view = view[signed_end + TAG_BYTES : length]
        signed_by, public = self._check_signer(route, reply_to, signer, h, sig_view)
        if algorithm != DIGEST_BLAKE3:  # signed: a peer that means another, not an attacker
            raise AuthError(f"body digest algorithm {algorithm} (this peer knows only BLAKE3: 1)")
        if body_length > self.max_body_bytes:
            raise AuthError(f"body of {body_length} bytes exceeds the authentication cap")
        if length + body_length + TRAILER_BYTES != total:
            raise AuthError(
                f"the head declares a {body_length}-byte body, but the message carries "
                f"{total - length - TRAILER_BYTES} (cut short, or padded)"
            )
        if not reply_to and not self.accepts(receiver.decode("utf-8", "replace"), arrived):
            raise AuthError(
                f"message addressed to {receiver.decode('utf-8', 'replace')!r}, not to this peer "
                "(a request replayed from another peer, or dialled by a name this peer "
                "does not advertise)"
            )
        ts = int.from_bytes(view[MAGIC_BYTES : MAGIC_BYTES + 8], "big") / 1000.0
        nonce = view[MAGIC_BYTES + 8 : FIXED_BYTES].tobytes()
        who = sender.decode("utf-8", "replace")  # bound by the tags; logs may read it
        try:  # the window follows the sender's clock (gossip/auth/replay.py): its key, else name
            off = self.guard.check(
                ts, nonce, sender=signed_by or who, signed=bool(signed_by), answer=bool(reply_to)
            )
        except ClockSkew as exc:
            # tag and signature checked out: the sender named is who sent it, and its clock
            # is off ours by `skew` (every request of its will be refused until they agree)
            raise self._skewed(who, route, exc, bool(reply_to), signed_by) from None
        if off is not None:  # accepted, but off by more than the plain window: said too
            self._skewed(who, route, off, bool(reply_to), signed_by)
        return Head(route, reply_to, nonce, signed_by, public, who, length, body_length)

    def open_body(self, head: Head, data: Any, *, digest: bytes | None = None) -> Opened:
        """The body of the envelope whose head `head` verified (`data`: the whole envelope),
        once its digest and the trailer's tag and signature check out; `digest`: BLAKE3 of
        what it covers, computed while it arrived (None: hashed here)."""
        view = _bytes_view(data)
        end = head.length + head.body_length
        if len(view) != end + TRAILER_BYTES:
            raise AuthError(f"message of {len(view)} bytes is not the one its head declared")
        covered = view[MAGIC_BYTES:end]
        if digest is None:
            digest = _digest(covered)
        if not hmac.compare_digest(digest, view[end : end + DIGEST_BYTES]):
            raise AuthError(
                "the body's digest does not match its trailer's (altered or corrupted in transit)"
            )
        t = _transcript(head.route, head.reply_to, len(covered), digest)
        tag = hmac.new(self._secret, t, hashlib.sha256).digest() if self._secret else _ZERO_TAG
        at = end + DIGEST_BYTES
        if not hmac.compare_digest(tag, view[at : at + TAG_BYTES]):
            raise AuthError("bad message authentication code on the body (altered)")
        sig_view = view[at + TAG_BYTES :]
        if head.public is None:
            if sig_view != _ZERO_SIG:
                raise AuthError(f"a signature where /v1/{head.route} takes none (altered?)")
        elif not verify_signature(head.public, sig_view.tobytes(), t):
            raise AuthError(f"bad signature on the body by {head.signed_by!r} (altered)")
        body = view[head.length : end]
        if len(body) <= INLINE_BYTES:
            return Opened(body.tobytes(), head.nonce, head.signed_by)
        mark_covered(body)  # its frame's own checksum would check the same bytes again
        return Opened(body, head.nonce, head.signed_by)

    def _skewed(
        self, sender: str, route: str, exc: ClockSkew, answer: bool, signed_by: str
    ) -> ClockSkew:
        """The refusal in plain words, naming the sender and by how much; said as
        gossip/auth/skew_witness.py says (once a sender; this peer's own clock blamed only
        on the word of members' keys)."""
        skew = exc.skew
        way = "behind" if skew > 0 else "ahead of"
        who = sender or "the sender"
        mine = f"that of {self.name}" if self.name else "this peer's"  # read on the other side
        text = (
            f"the clock of {who} is {abs(skew):.0f} s {way} {mine} (an envelope may be "
            f"{self.guard.max_offset:g} s off this peer's clock): set the clocks right (NTP)"
        )
        if exc.tolerated:
            text = (
                f"the clock of {who} is {abs(skew):.0f} s {way} {mine}: tolerated (up to "
                f"{self.guard.max_offset:g} s), but set the clocks right (NTP)"
            )
        self.skews.saw(
            text, route, skew, tolerated=exc.tolerated, named=sender, signed_by=signed_by,
            answer=answer,
        )  # fmt: skip
        return ClockSkew(text, skew, said=True)

    def _check_signer(
        self, route: str, reply_to: bytes, signer: bytes, t: bytes, sig_view: memoryview
    ) -> tuple[str, bytes | None]:
        """(the member id that signed a request on a signed route, its key), else ("", None);
        or raise."""
        if reply_to or route not in self.signed_routes:
            if signer or sig_view != _ZERO_SIG:
                raise AuthError(f"a signature where /v1/{route} takes none (altered?)")
            return "", None
        peer_id = signer.decode("utf-8", "replace")
        if not peer_id:
            raise NotAMember(f"/v1/{route} must be signed by a member's peer key")
        public = self.keys(peer_id) if self.keys is not None else None
        if public is None:
            raise NotAMember(f"signer {peer_id!r} is not a live member of this swarm")
        if not verify_signature(public, sig_view.tobytes(), t):
            raise AuthError(f"bad signature by {peer_id!r} (not its key, or altered)")
        return peer_id, public

    def accepts(self, receiver: str, arrived: str = "") -> bool:
        return addressed_to(self.name, receiver, arrived)


def addressed_to(name: str, receiver: str, arrived: str = "") -> bool:
    """Whether a request addressed to `receiver` is for the peer named `name`: its advertised
    address, or the address the request arrived at (`arrived`; a loopback arrival also
    answers to `localhost`). Why both: `--join` seeds are dialled as the user typed them, which
    need not be the address the seed advertises; the arrival address is what TCP saw."""
    if receiver == name and name:
        return True
    if not arrived:
        return receiver == name  # an unnamed signer outside a server: tools and tests
    if receiver == arrived:
        return True
    host, _, port = arrived.rpartition(":")
    return host in ("127.0.0.1", "[::1]") and receiver == f"localhost:{port}"


def _check_magic(view: memoryview) -> None:
    magic = view[:MAGIC_BYTES].tobytes()
    if magic == MAGIC:
        return
    if magic[:3] == MAGIC[:3] and magic[3:].isdigit():  # another version of this envelope
        raise EnvelopeSkew(
            f"another swarmnode release: envelope version {magic[3:].decode()} from the sender, "
            f"{VERSION} at the receiver (run the same release on every peer)"
        )
    outsider = AuthError(
        "message is not authenticated (no envelope; is the swarm `secret` the same there?)"
    )
    # a peer without the secret knocking (a joiner started without it): routine, so the HTTP
    # layer logs it at INFO, once per address, as any stranger's 403
    outsider.stranger = True  # type: ignore[attr-defined]
    raise outsider


def digest(body: Any) -> bytes:
    """BLAKE3-256 of a bytes-like, in one pass, without copying it."""
    return blake3.blake3(body).digest()


def _digest(view: memoryview) -> bytes:
    threads = blake3.blake3.AUTO if len(view) > INLINE_BYTES else 1
    return blake3.blake3(view, max_threads=threads).digest()


def _transcript(route: str, reply_to: bytes, length: int, d: bytes) -> bytes:
    """What the trailer's tag and signature cover: the route and reply binding, the length
    covered and its digest (so the body is bound to the head the digest ran over)."""
    return _bound(DOMAIN, route, reply_to, length.to_bytes(8, "big"), d)


def _head_transcript(route: str, reply_to: bytes, signed: Any) -> bytes:
    """What the head's tag and signature cover: the route and reply binding, then the head
    from the timestamp to the digest algorithm."""
    return _bound(HEAD_DOMAIN, route, reply_to, bytes(signed[MAGIC_BYTES:]))


def _bound(domain: bytes, route: str, reply_to: bytes, *rest: bytes) -> bytes:
    """`rest` behind a domain and the route and reply binding both transcripts share: a
    head's tag can never pass for a trailer's, nor one route's for another's."""
    r = route.encode()
    return b"".join(
        (domain, len(r).to_bytes(2, "big"), r, len(reply_to).to_bytes(1, "big"), reply_to, *rest)
    )


def _name(text: str) -> bytes:
    raw = text.encode()
    if len(raw) > MAX_NAME_BYTES:
        raise AuthError(f"peer address of {len(raw)} bytes is too long to sign")
    return raw


def _lv(raw: bytes) -> bytes:
    return len(raw).to_bytes(1, "big") + raw


def _read_lv(view: memoryview, pos: int) -> tuple[bytes, int]:
    if pos >= len(view):
        raise AuthError("message is too short to be authenticated")
    n = view[pos]
    end = pos + 1 + n
    if end > len(view):
        raise AuthError("message is too short to be authenticated")
    return view[pos + 1 : end].tobytes(), end


def nonce_of(envelope: Any) -> bytes:
    """The nonce of a sealed envelope (what the response to it is bound to)."""
    if isinstance(envelope, (Parts, Trailed)):  # head, body, trailer: the nonce is in the head
        return envelope.buffers[0][MAGIC_BYTES + 8 : FIXED_BYTES].tobytes()
    return _bytes_view(envelope)[MAGIC_BYTES + 8 : FIXED_BYTES].tobytes()


def header_length(envelope: Any) -> int:
    """Bytes of a sealed envelope's head, before its body (from its first bytes: the names
    say; `AuthError` while too few of them are there to tell)."""
    view = _bytes_view(envelope)
    _, pos = _read_lv(view, FIXED_BYTES)
    _, pos = _read_lv(view, pos)
    return _read_lv(view, pos)[1] + SIGNED_TAIL_BYTES + HEAD_AUTH_BYTES


def _bytes_view(data: Any) -> memoryview:
    if isinstance(data, Parts):
        data = bytes(data)
    view = memoryview(data)
    if view.format != "B" or view.ndim != 1:
        view = view.cast("B")
    return view
