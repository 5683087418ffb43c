"""Who sent the bytes: envelopes, keys, replay protection.

- `signer.py`: envelopes around requests (`Signer`): a swarm secret's HMAC, a member key's
  Ed25519 signature, or both, bound to route, sender, receiver, time and nonce.
- `transport.py`: `AuthTransport` seals requests and opens answers; `auth_handlers` opens
  requests before a handler runs.
- `peer_key.py`: a peer's Ed25519 key pair and the peer id derived from it (`PeerKey`).
- `operator.py`: operator-signed admin requests (`OperatorKey`, `OperatorVerifier`).
- `replay.py`: fresh timestamps and unseen nonces in bounded memory (`ReplayGuard`).
- `stream_digest.py`, `seal_stream.py`: BLAKE3 of a large body while it is received or sent.
"""

from swarmnode.gossip.auth.operator import OperatorKey, OperatorVerifier
from swarmnode.gossip.auth.peer_key import PeerKey, peer_id_of
from swarmnode.gossip.auth.replay import ReplayGuard
from swarmnode.gossip.auth.signer import Signer
from swarmnode.gossip.auth.transport import AuthTransport, auth_handlers

__all__ = [
    "AuthTransport",
    "OperatorKey",
    "OperatorVerifier",
    "PeerKey",
    "ReplayGuard",
    "Signer",
    "auth_handlers",
    "peer_id_of",
]
