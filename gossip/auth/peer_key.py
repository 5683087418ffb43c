"""A peer's Ed25519 key pair and the peer id derived from its public key.

The crypto is the `cryptography` library's (OpenSSL underneath); nothing here is hand-written
beyond choosing the id: the first 80 bits of SHA-256(public key), in lower-case base32 (16
characters: short enough for logs). Finding another key with a given id takes ~2^80 hashes, so
an id names one key, and a record signed by that key is the only word about that peer.
"""

from __future__ import annotations

import base64
import hashlib
import re

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import (
    Ed25519PrivateKey,
    Ed25519PublicKey,
)
from swarmnode.gossip.errors import PeerKeyError

PUBLIC_KEY_BYTES = 32
SIGNATURE_BYTES = 64
ID_HASH_BYTES = 10  # 80 bits -> 16 base32 characters
KEY_FILE = "peer.key"  # where a peer keeps its key, in its checkpoint dir (`key_file_text`)
_PUBLIC_HEX_RE = re.compile(r"^[0-9a-fA-F]{64}$")


def peer_id_of(public_key: bytes) -> str:
    """The peer id that belongs to `public_key` (32 raw bytes)."""
    digest = hashlib.sha256(public_key).digest()[:ID_HASH_BYTES]
    return base64.b32encode(digest).decode("ascii").lower()


def verify_signature(public_key: bytes, signature: bytes, data: bytes) -> bool:
    """Whether `signature` is `public_key`'s Ed25519 signature of `data` (never raises)."""
    if len(public_key) != PUBLIC_KEY_BYTES or len(signature) != SIGNATURE_BYTES:
        return False
    try:
        Ed25519PublicKey.from_public_bytes(public_key).verify(signature, data)
    except (InvalidSignature, ValueError):
        return False
    return True


def parse_public_key(text: str) -> bytes:
    """A public key written as 64 hex digits (what `PeerKey.public_hex` prints)."""
    text = text.strip()
    if not _PUBLIC_HEX_RE.match(text):
        raise PeerKeyError(f"a public key is 64 hex digits, got {text[:80]!r}")
    return bytes.fromhex(text)


class PeerKey:
    """One peer's signing key. `peer_id` and `public` are fixed at construction."""

    __slots__ = ("_private", "peer_id", "public")

    def __init__(self, private: Ed25519PrivateKey) -> None:
        self._private = private
        self.public: bytes = private.public_key().public_bytes(
            serialization.Encoding.Raw, serialization.PublicFormat.Raw
        )
        self.peer_id: str = peer_id_of(self.public)

    @classmethod
    def generate(cls) -> PeerKey:
        return cls(Ed25519PrivateKey.generate())

    @classmethod
    def from_private_bytes(cls, raw: bytes) -> PeerKey:
        """From the 32-byte raw private key (`private_bytes()`)."""
        if len(raw) != 32:
            raise PeerKeyError(f"a private key is 32 bytes, got {len(raw)}")
        return cls(Ed25519PrivateKey.from_private_bytes(raw))

    def key_file_text(self) -> bytes:
        """The content of a `peer.key` file: the private key in hex, one line (mode 0600)."""
        return self.private_bytes().hex().encode() + b"\n"

    def private_bytes(self) -> bytes:
        return self._private.private_bytes(
            serialization.Encoding.Raw,
            serialization.PrivateFormat.Raw,
            serialization.NoEncryption(),
        )

    @property
    def public_hex(self) -> str:
        """The public key as one line of a trust file (`--trust`)."""
        return self.public.hex()

    def sign(self, data: bytes) -> bytes:
        return self._private.sign(data)

    def __repr__(self) -> str:  # never the private half
        return f"PeerKey({self.peer_id})"
