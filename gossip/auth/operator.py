"""Operator-signed admin requests: Ed25519 over route, receiver, time, nonce and body.

The admin routes (runtime faults, byzantine behaviour, slowdown) exist to sabotage a peer on
purpose, for chaos runs. Who may use them must not be "anyone who can reach the port" (any user
on a shared host can reach 127.0.0.1) nor "anyone holding the swarm secret" (every peer holds it,
so one byzantine peer could turn every other peer byzantine). So they are signed by an operator
key that no peer holds: peers are given only its *public* half (`admin_key`), which verifies and
cannot sign. A stolen peer disk or environment gives an attacker nothing to command the others.
An HMAC operator secret was the alternative; it would have to sit on every peer, which is the
same weakness one level up.

Envelope (the body follows it):

    [4 bytes MAGIC] [8 bytes timestamp, ms] [16 bytes nonce] [64 bytes signature]
    [1 byte len | receiver]

    signature = Ed25519(DOMAIN | len(route) | route | timestamp | nonce
                        | len(receiver) | receiver | body)

The receiver is the "host:port" the operator sends it to; a peer opens it only when that is
one of its names (`Signer.accepts`: advertised, or the address it arrived at), so a command
captured on its way to one peer is refused by every other; each peer's own `ReplayGuard`
refuses it a second time at its receiver. Answers are not signed (a peer has no operator key).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from swarmnode.gossip.auth.signer import ReplayGuard, addressed_to
from swarmnode.gossip.errors import AuthError

MAGIC = b"SNO1"
DOMAIN = b"swarmnode/admin/v1\x00"
SIG_BYTES = 64
FIXED_BYTES = len(MAGIC) + 8 + 16 + SIG_BYTES
MAX_NAME_BYTES = 255


class OperatorKey:
    """The operator's private key: signs admin requests (the chaos runner, a test, a script)."""

    def __init__(self, key: Ed25519PrivateKey, clock: Callable[[], float] = time.time) -> None:
        self._key = key
        self.clock = clock

    @classmethod
    def generate(cls) -> OperatorKey:
        return cls(Ed25519PrivateKey.generate())

    @classmethod
    def load(cls, path: str | Path) -> OperatorKey:
        """A PEM (PKCS#8) Ed25519 private key file."""
        try:
            key = serialization.load_pem_private_key(Path(path).read_bytes(), password=None)
        except (OSError, ValueError, TypeError) as exc:
            raise AuthError(f"cannot read the operator key {str(path)!r}: {exc}") from None
        if not isinstance(key, Ed25519PrivateKey):
            raise AuthError(f"operator key {str(path)!r} is not an Ed25519 private key")
        return cls(key)

    def save(self, private_path: str | Path, public_path: str | Path) -> None:
        """Write the private key (mode 0600) and its public half (what peers are given)."""
        pem = self._key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
        fd = os.open(private_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "wb") as f:
            f.write(pem)
        Path(public_path).write_bytes(self.public_pem())

    def public_pem(self) -> bytes:
        return self._key.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )

    def sign(self, route: str, body: bytes, *, to: str) -> bytes:
        """The admin request for `route` on the peer at `to` ("host:port", as dialled)."""
        receiver = _name(to)
        ts = int(self.clock() * 1000).to_bytes(8, "big")
        nonce = os.urandom(16)
        sig = self._key.sign(_message(route, ts, nonce, receiver, body))
        return b"".join((MAGIC, ts, nonce, sig, len(receiver).to_bytes(1, "big"), receiver, body))


class OperatorVerifier:
    """A peer's side: the operator's public key and this peer's own replay guard."""

    def __init__(
        self,
        key: Ed25519PublicKey,
        *,
        name: str = "",
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._key = key
        self.name = name
        self.guard = ReplayGuard(clock=clock)

    @classmethod
    def load(cls, path: str | Path) -> OperatorVerifier:
        """A PEM (SubjectPublicKeyInfo) Ed25519 public key file."""
        try:
            key = serialization.load_pem_public_key(Path(path).read_bytes())
        except (OSError, ValueError, TypeError) as exc:
            raise AuthError(f"cannot read the `admin_key` {str(path)!r}: {exc}") from None
        if not isinstance(key, Ed25519PublicKey):
            raise AuthError(f"`admin_key` {str(path)!r} is not an Ed25519 public key")
        return cls(key)

    def open(self, route: str, data: Any, arrived: str = "") -> bytes:
        """The body of an admin request; `AuthError` unless signed by the operator for this
        route and this peer (`arrived`: the "host:port" it came in on), fresh and never seen."""
        raw = bytes(data)
        if len(raw) < FIXED_BYTES + 1:
            raise AuthError("admin request is not signed by the operator (too short)")
        if raw[:4] != MAGIC:
            raise AuthError("admin request is not signed by the operator (no envelope)")
        ts, nonce, sig = raw[4:12], raw[12:28], raw[28:FIXED_BYTES]
        n = raw[FIXED_BYTES]
        end = FIXED_BYTES + 1 + n
        if end > len(raw):
            raise AuthError("admin request is not signed by the operator (truncated)")
        receiver, body = raw[FIXED_BYTES + 1 : end], raw[end:]
        try:
            self._key.verify(sig, _message(route, ts, nonce, receiver, body))
        except InvalidSignature:
            raise AuthError("bad operator signature (another key, or altered)") from None
        where = receiver.decode("utf-8", "replace")
        if not addressed_to(self.name, where, arrived):  # the same rule as swarm requests
            raise AuthError(f"admin request addressed to {where!r}, not to this peer")
        self.guard.check(int.from_bytes(ts, "big") / 1000.0, nonce)
        return body


def _message(route: str, ts: bytes, nonce: bytes, receiver: bytes, body: bytes) -> bytes:
    r = route.encode()
    return b"".join(
        (DOMAIN, len(r).to_bytes(2, "big"), r, ts, nonce, len(receiver).to_bytes(1, "big"),
         receiver, body)
    )  # fmt: skip


def _name(text: str) -> bytes:
    raw = text.encode()
    if len(raw) > MAX_NAME_BYTES:
        raise AuthError(f"peer address of {len(raw)} bytes is too long to sign")
    return raw


__all__ = ["OperatorKey", "OperatorVerifier"]
