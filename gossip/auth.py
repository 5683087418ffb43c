"""HMAC-SHA256 envelopes around every message, for swarms started with a swarm `secret`.

An envelope is independent of what it carries (control message, parameter payload, anything):

    [4 bytes MAGIC] [8 bytes timestamp, ms since the epoch, big-endian] [16 bytes random nonce]
    [32 bytes tag] [1 byte len | sender] [1 byte len | receiver] [body]

    tag = HMAC-SHA256(secret, DOMAIN | len(route) | route | len(reply_to) | reply_to
                              | timestamp | nonce | len(sender) | sender
                              | len(receiver) | receiver | len(body) | BLAKE3(body))

- The route is bound, so a sealed `gossip` request cannot be replayed against `pushpull`.
- The receiver is bound: a request names the address it is sent to ("host:port", exactly what
  the sender dials) and a peer opens only requests addressed to one of its own names (its
  advertised address, or the address the request arrived at: `ARRIVED_AT`, set by the
  transport). So a request captured on its way to one peer is refused by every other peer:
  each keeps its own nonce cache, and without this binding any capture replayed to the rest
  of the swarm within the skew window. The sender (its advertised address) is bound too, so
  logs can name who signed a message; with one shared secret it proves membership, not
  identity (that is the membership layer's job).
- `reply_to` is the request's nonce when a response is sealed, so an answer cannot be swapped
  for another answer, nor a request reflected back as an answer (responses carry no names:
  the nonce binds them to their request, and through it to sender and receiver).
- The body enters as its BLAKE3 digest (a cryptographic hash: a fast non-cryptographic one
  such as xxh3 would let anyone swap the body for one with the same digest). It is hashed
  exactly once, in one pass over the buffer (no concatenation copy of a 100 MB payload), and
  the HMAC is over ~100 bytes. BLAKE3 measured 2x SHA-256 here (docs/benchmarks.md).
- `open` checks the length caps, the magic and the tag (in constant time, `hmac.compare_digest`)
  before anything else looks at the body: unauthenticated bytes never reach msgpack. Only then
  does the `ReplayGuard` check the timestamp against the clock skew and the nonce against the
  nonces seen in that window, so forged messages cannot fill the window either.

A message replayed verbatim is rejected by the guard; a replay with a changed body, route or
timestamp fails the tag. Without a secret, nothing is wrapped (see `node/peer/node.py`).

Large bodies are hashed in a worker thread by `AuthTransport` and `auth_handlers`, because
BLAKE3 of 100 MB takes ~30-50 ms and the event loop must not stall for that long.
"""

from __future__ import annotations

import asyncio
import hashlib
import heapq
import hmac
import os
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

import blake3
import numpy as np
from swarmnode.gossip.transport import (
    ARRIVED_AT,
    Handler,
    RemoteError,
    RequestTimeout,
    Transport,
    TransportError,
)
from swarmnode.kernels.errors import SwarmnodeError

MAGIC = b"SNA2"
DOMAIN = b"swarmnode/auth/v2\x00"
NONCE_BYTES = 16
TAG_BYTES = 32
FIXED_BYTES = len(MAGIC) + 8 + NONCE_BYTES + TAG_BYTES
HEADER_BYTES = FIXED_BYTES + 2  # the shortest header: empty sender and receiver
MAX_NAME_BYTES = 255
MAX_HEADER_BYTES = HEADER_BYTES + 2 * MAX_NAME_BYTES
MAX_SKEW_S = 30.0
MAX_BODY_BYTES = (1 << 30) + (1 << 20)  # a 1 GiB parameter payload plus its frame
MAX_NONCES = 1 << 17  # ~130k messages per skew window before the guard starts to fail closed
# Bodies up to this size are sealed/opened inline and returned as `bytes`; larger ones go to a
# worker thread and come back as memoryviews (one copy to seal, none to open).
INLINE_BYTES = 1 << 20


class AuthError(SwarmnodeError):
    """A message failed authentication: unsigned, forged, wrong secret, replayed, truncated."""

    status = 401


class UnauthenticatedRequest(AuthError, RemoteError):
    """Raised by a server-side handler: the request is answered 401, the handler never runs."""

    def __init__(self, message: str) -> None:
        RemoteError.__init__(self, message, status=401)


class UnauthenticatedResponse(AuthError, TransportError):
    """Raised by `AuthTransport`: the peer's answer failed authentication.

    It is also a `TransportError`, so protocol code that treats a failed request as a failed
    peer (membership, exchange) does the same for a peer that cannot prove it has the secret.
    """


class ReplayGuard:
    """Rejects stale timestamps and nonces already seen, in bounded memory. Thread-safe.

    A message is fresh when |now - ts| <= max_skew and its nonce is new. Nonces are kept until
    their timestamp leaves the window (after that, the skew check rejects a replay anyway). When
    more than `max_nonces` are live, the oldest are evicted and `floor` rises to their
    timestamp: anything at or below the floor is rejected, so eviction never re-opens a replay.
    """

    def __init__(
        self,
        max_skew: float = MAX_SKEW_S,
        max_nonces: int = MAX_NONCES,
        clock: Callable[[], float] = time.time,
    ) -> None:
        if not max_skew > 0 or max_nonces < 1:
            raise ValueError("max_skew must be > 0 and max_nonces >= 1")
        self.max_skew = max_skew
        self.max_nonces = max_nonces
        self.clock = clock
        self.floor = float("-inf")
        self._seen: set[bytes] = set()
        self._by_time: list[tuple[float, bytes]] = []  # min-heap of (timestamp, nonce)
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._seen)

    def check(self, ts: float, nonce: bytes) -> None:
        """Record (ts, nonce) or raise `AuthError` if it is stale, from the future, or seen."""
        now = self.clock()
        if abs(now - ts) > self.max_skew:
            raise AuthError(
                f"message timestamp is {now - ts:+.1f} s off this peer's clock "
                f"(max skew {self.max_skew:g} s)"
            )
        with self._lock:
            self._expire(now)
            if ts <= self.floor:
                raise AuthError("message is older than the replay window can vouch for")
            if nonce in self._seen:
                raise AuthError("replayed message (nonce already seen)")
            self._seen.add(nonce)
            heapq.heappush(self._by_time, (ts, nonce))
            while len(self._seen) > self.max_nonces:
                old_ts, old = heapq.heappop(self._by_time)
                self._seen.discard(old)
                self.floor = max(self.floor, old_ts)

    def _expire(self, now: float) -> None:
        while self._by_time and self._by_time[0][0] < now - self.max_skew:
            _, old = heapq.heappop(self._by_time)
            self._seen.discard(old)


class Signer:
    """Seals and opens envelopes with one swarm secret. One per peer: it owns the replay guard.

    `name` is this peer's advertised address: it signs as that sender and opens requests
    addressed to it (or to where they arrived, `ARRIVED_AT`). An unnamed signer (a tool, a
    test) opens only requests addressed to nobody, which no peer ever sends.
    """

    def __init__(
        self,
        secret: str | bytes,
        *,
        name: str = "",
        max_body_bytes: int = MAX_BODY_BYTES,
        guard: ReplayGuard | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        key = secret.encode() if isinstance(secret, str) else bytes(secret)
        if not key:
            raise AuthError("the swarm `secret` must not be empty")
        self._key = key
        self.name = name
        self.max_body_bytes = max_body_bytes
        self.clock = clock
        self.guard = guard if guard is not None else ReplayGuard(clock=clock)

    def seal(
        self, route: str, body: Any, *, to: str = "", reply_to: bytes = b""
    ) -> bytes | memoryview:
        """Wrap `body` (any bytes-like) in an authenticated envelope for `route` on peer `to`."""
        body = _bytes_view(body)
        if len(body) > self.max_body_bytes:
            raise AuthError(f"body of {len(body)} bytes exceeds the {self.max_body_bytes}-byte cap")
        sender, receiver = (b"", b"") if reply_to else (_name(self.name), _name(to))
        ts = int(self.clock() * 1000).to_bytes(8, "big")
        nonce = os.urandom(NONCE_BYTES)
        tag = self._tag(route, reply_to, ts, nonce, sender, receiver, body)
        head = b"".join((MAGIC, ts, nonce, tag, _lv(sender), _lv(receiver)))
        if len(body) <= INLINE_BYTES:
            return head + bytes(body)
        # numpy's allocator asks for huge pages: the one copy costs ~15 ms per 100 MB, not ~85
        out = np.empty(len(head) + len(body), dtype=np.uint8)
        out[: len(head)] = np.frombuffer(head, np.uint8)
        out[len(head) :] = np.frombuffer(body, np.uint8)
        return memoryview(out)

    def open(self, route: str, data: Any, *, reply_to: bytes = b"") -> bytes | memoryview:
        """The body of an envelope sealed for `route`; `AuthError` unless authentic and fresh."""
        return self.unseal(route, data, reply_to=reply_to)[0]

    def unseal(
        self, route: str, data: Any, *, reply_to: bytes = b""
    ) -> tuple[bytes | memoryview, bytes]:
        """(body, nonce) of an envelope; the nonce is what a response's `reply_to` binds to.

        A request (no `reply_to`) must be addressed to this peer: see `accepts`."""
        view = _bytes_view(data)
        if len(view) < HEADER_BYTES:
            raise AuthError(f"message of {len(view)} bytes is too short to be authenticated")
        if len(view) - HEADER_BYTES > self.max_body_bytes + 2 * MAX_NAME_BYTES:
            raise AuthError(f"message of {len(view)} bytes exceeds the authentication cap")
        if view[:4] != MAGIC:
            raise AuthError(
                "message is not authenticated (no envelope; is the swarm `secret` set there?)"
            )
        ts, nonce, tag = view[4:12].tobytes(), view[12:28].tobytes(), view[28:FIXED_BYTES]
        sender, pos = _read_lv(view, FIXED_BYTES)
        receiver, pos = _read_lv(view, pos)
        body = view[pos:]
        if len(body) > self.max_body_bytes:
            raise AuthError(f"message of {len(view)} bytes exceeds the authentication cap")
        if not hmac.compare_digest(
            self._tag(route, reply_to, ts, nonce, sender, receiver, body), tag
        ):
            raise AuthError("bad message authentication code (wrong secret, or altered)")
        if not reply_to and not self.accepts(receiver.decode("utf-8", "replace")):
            raise AuthError(
                f"message addressed to {receiver.decode('utf-8', 'replace')!r}, not to this peer "
                "(a request replayed from another peer, or dialled by a name this peer "
                "does not advertise)"
            )
        self.guard.check(int.from_bytes(ts, "big") / 1000.0, nonce)
        return (body.tobytes() if len(body) <= INLINE_BYTES else body), nonce

    def accepts(self, receiver: str) -> bool:
        return addressed_to(self.name, receiver)

    def _tag(
        self,
        route: str,
        reply_to: bytes,
        ts: bytes,
        nonce: bytes,
        sender: bytes,
        receiver: bytes,
        body: memoryview,
    ) -> bytes:
        r = route.encode()
        msg = b"".join(
            (
                DOMAIN,
                len(r).to_bytes(2, "big"),
                r,
                len(reply_to).to_bytes(1, "big"),
                reply_to,
                ts,
                nonce,
                _lv(sender),
                _lv(receiver),
                len(body).to_bytes(8, "big"),
                digest(body),
            )
        )
        return hmac.new(self._key, msg, hashlib.sha256).digest()


def addressed_to(name: str, receiver: str) -> bool:
    """Whether a request addressed to `receiver` is for the peer named `name`: its advertised
    address, or the address the request arrived at (`ARRIVED_AT`; a loopback arrival also
    answers to `localhost`). Why both: `--join` seeds are dialled as the user typed them, which
    need not be the address the seed advertises; the arrival address is what TCP saw."""
    if receiver == name and name:
        return True
    arrived = ARRIVED_AT.get()
    if not arrived:
        return receiver == name  # an unnamed signer outside a server: tools and tests
    if receiver == arrived:
        return True
    host, _, port = arrived.rpartition(":")
    return host in ("127.0.0.1", "[::1]") and receiver == f"localhost:{port}"


def digest(body: Any) -> bytes:
    """BLAKE3-256 of a bytes-like, in one pass, without copying it."""
    return blake3.blake3(body).digest()


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
    view = _bytes_view(envelope)
    return view[12:28].tobytes()


def header_length(envelope: Any) -> int:
    """Bytes before the body in a sealed envelope (its header and the two names)."""
    view = _bytes_view(envelope)
    _, pos = _read_lv(view, FIXED_BYTES)
    return _read_lv(view, pos)[1]


class AuthTransport:
    """A `Transport` that seals every request and opens (authenticates) every response."""

    def __init__(self, inner: Transport, signer: Signer) -> None:
        self.inner = inner
        self.signer = signer

    async def request(self, addr: str, route: str, body: bytes, *, timeout: float) -> bytes:
        start = time.monotonic()
        sealed = await _maybe_in_thread(len(body), self.signer.seal, route, body, to=addr)
        remaining = timeout - (time.monotonic() - start)
        if remaining <= 0:
            raise RequestTimeout(f"{addr} {route}: deadline passed while signing")
        answer = await self.inner.request(addr, route, sealed, timeout=remaining)
        try:
            return await _maybe_in_thread(
                len(answer), self.signer.open, route, answer, reply_to=nonce_of(sealed)
            )
        except AuthError as exc:
            raise UnauthenticatedResponse(f"{addr} {route}: {exc}") from None

    async def close(self) -> None:
        await self.inner.close()


def auth_handlers(handlers: Mapping[str, Handler], signer: Signer) -> dict[str, Handler]:
    """Wrap server-side handlers: open each request (401 if not authentic), seal each answer."""
    return {route: _authenticated(route, handler, signer) for route, handler in handlers.items()}


def _authenticated(route: str, handler: Handler, signer: Signer) -> Handler:
    async def wrapped(data: bytes) -> bytes:
        try:
            body, nonce = await _maybe_in_thread(len(data), signer.unseal, route, data)
        except AuthError as exc:
            raise UnauthenticatedRequest(f"{route}: {exc}") from None
        answer = await handler(body)
        return await _maybe_in_thread(len(answer), signer.seal, route, answer, reply_to=nonce)

    wrapped.__name__ = f"authenticated_{getattr(handler, '__name__', 'handler')}"
    return wrapped


async def _maybe_in_thread(size: int, fn: Callable[..., Any], *args: Any, **kw: Any) -> Any:
    """Run `fn` inline for small messages, in a worker thread when hashing would block the loop."""
    if size <= INLINE_BYTES:
        return fn(*args, **kw)
    return await asyncio.to_thread(fn, *args, **kw)


def _bytes_view(data: Any) -> memoryview:
    view = memoryview(data)
    if view.format != "B" or view.ndim != 1:
        view = view.cast("B")
    return view
