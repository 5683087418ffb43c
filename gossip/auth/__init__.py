"""Who sent the bytes: envelopes, keys, replay protection.

- `signer.py`: envelopes around requests (`Signer`): a swarm secret's HMAC, a member key's
  Ed25519 signature, or both, bound to route, sender, receiver, time and nonce.
- `transport.py`: `AuthTransport` seals requests and opens answers; `auth_handlers` opens
  requests before a handler runs.
- `peer_key.py`: a peer's Ed25519 key pair and the peer id derived from it (`PeerKey`).
- `operator.py`: operator-signed admin requests (`OperatorKey`, `OperatorVerifier`).
- `replay.py`: fresh timestamps and unseen nonces in bounded memory (`ReplayGuard`), judged
  against each sender's own clock as measured here (a clock up to 300 s off still exchanges).
- `skew_witness.py`: who was off this peer's clock, said once each; this peer's own clock is
  blamed only on the word of members' keys (`SkewWitnesses`), made-up names fill nothing.
- `stream_digest.py`, `seal_stream.py`: BLAKE3 of a large body while it is received or sent.
"""

from swarmnode.gossip.auth.operator import OperatorKey, OperatorVerifier
from swarmnode.gossip.auth.peer_key import (
    KEY_FILE,
    PUBLIC_KEY_BYTES,
    SIGNATURE_BYTES,
    PeerKey,
    parse_public_key,
    peer_id_of,
    verify_signature,
)
from swarmnode.gossip.auth.read_token import bearer, read_token
from swarmnode.gossip.auth.replay import ReplayGuard
from swarmnode.gossip.auth.signer import (
    MAX_OVERHEAD_BYTES,
    SIGNED_ROUTES,
    VERSION,
    Signer,
    nonce_of,
)
from swarmnode.gossip.auth.transport import AuthTransport, auth_handlers

__all__ = [
    "KEY_FILE",
    "MAX_OVERHEAD_BYTES",
    "PUBLIC_KEY_BYTES",
    "SIGNATURE_BYTES",
    "SIGNED_ROUTES",
    "VERSION",
    "AuthTransport",
    "OperatorKey",
    "OperatorVerifier",
    "PeerKey",
    "ReplayGuard",
    "Signer",
    "auth_handlers",
    "bearer",
    "nonce_of",
    "parse_public_key",
    "peer_id_of",
    "read_token",
    "verify_signature",
]
