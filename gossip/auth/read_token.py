"""The read token of a closed swarm: what lets an operator read a peer's figures without being a
member (issue 34: a `--secret` swarm's status, page and metrics are not for everyone).

    token = hex(HMAC-SHA256(secret, READ_DOMAIN))[:32]

Derived one way from the swarm secret, so that every holder of the secret can compute it
(`swarmnode status --secret`, the chaos runner, a member's page asking another member), and a
holder of the token learns nothing of the secret: it reads figures, it never joins, signs or
changes anything. It is a bearer: sent in the clear over plain HTTP it is as visible as the
figures it guards (a proxy that terminates TLS in front of a peer hides both).
"""

from __future__ import annotations

import hashlib
import hmac

READ_DOMAIN = b"swarmnode/read-token/v1"
TOKEN_CHARS = 32  # 128 bits of the HMAC, in hex


def read_token(secret: str | bytes) -> str:
    """The swarm's read token (see the module doc)."""
    key = secret.encode() if isinstance(secret, str) else bytes(secret)
    return hmac.new(key, READ_DOMAIN, hashlib.sha256).hexdigest()[:TOKEN_CHARS]


def bearer(token: str | None) -> dict[str, str]:
    """The request header that presents `token` (none without one)."""
    return {} if token is None else {"Authorization": f"Bearer {token}"}
