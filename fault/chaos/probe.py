"""Probing peers from outside: `/v1/status` samples, parameter pulls, admin requests.

Every request carries a short deadline and never raises for a peer's failure: a dead or frozen
peer gives a `missing` sample with the reason, so the sampling loop never blocks on one peer.
Decoding parameters and computing distances are numpy work: they run in a worker thread.

Parameters are read through `admin/params`, signed by the run's operator key like every admin
request (gossip/auth/operator.py): `params` serves only members, whose keys sign their requests,
and the probe is none. A caller with a swarm `Signer` may still pull `params` as before (a test
of that refusal, or a tool holding a member's key).
GET /v1/status is public and never signed.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import logging
import math
from collections.abc import Mapping, Sequence
from typing import Any

import aiohttp
import numpy as np
from swarmnode.gossip.auth import OperatorKey, Signer, nonce_of
from swarmnode.gossip.errors import AuthError
from swarmnode.gossip.wire import decode_params, encode_control

log = logging.getLogger(__name__)

PROBE_SENDER = "chaos"
STATUS_FIELDS = (
    "step",
    "loss",
    "acc",
    "test_loss",
    "samples_per_s",
    "state",
    "byzantine",
    "faults",
)
EXCHANGE_FIELDS = ("rounds", "applied", "served", "rejected", "last_round_s", "max_round_s")


def _url(addr: str, route: str) -> str:
    return f"http://{addr}/v1/{route}"


async def fetch_status(
    session: aiohttp.ClientSession, addr: str, timeout: float
) -> tuple[dict[str, Any] | None, str]:
    """(status JSON, "") or (None, why) within `timeout` seconds."""
    try:
        async with session.get(
            _url(addr, "status"), timeout=aiohttp.ClientTimeout(total=timeout)
        ) as resp:
            if resp.status != 200:
                return None, f"HTTP {resp.status}"
            body = await resp.read()
        status = json.loads(body)
    except asyncio.TimeoutError:
        return None, "timeout"
    except (aiohttp.ClientError, OSError) as exc:
        return None, f"unreachable: {type(exc).__name__}"
    except ValueError:
        return None, "bad JSON"
    if not isinstance(status, dict) or not isinstance(status.get("self"), dict):
        return None, "status without 'self'"
    return status, ""


def condense(status: Mapping[str, Any]) -> dict[str, Any]:
    """The fields a report keeps from one `/v1/status` answer (members as `{peer_id: state}`)."""
    me = status.get("self", {})
    out: dict[str, Any] = {k: me.get(k) for k in STATUS_FIELDS}
    out["peer_id"] = me.get("peer_id")
    exchange = me.get("exchange") if isinstance(me.get("exchange"), dict) else {}
    out.update({k: exchange.get(k) for k in EXCHANGE_FIELDS})
    members = status.get("members") if isinstance(status.get("members"), list) else []
    out["members"] = {str(m.get("peer_id")): m.get("state") for m in members if isinstance(m, dict)}
    return out


async def fetch_params(
    session: aiohttp.ClientSession,
    addr: str,
    timeout: float,
    signer: Signer | None = None,
    operator: OperatorKey | None = None,
) -> tuple[np.ndarray | None, str]:
    """A peer's current parameters (a `swarmnode.gossip.wire.frames` payload), or (None, why): from
    `admin/params` with an `operator` key, else from `params` (sealed with `signer`)."""
    if operator is not None:
        body = operator.sign("admin/params", encode_control("params", sender=PROBE_SENDER), to=addr)
        data, nonce, why = await _post(session, addr, "admin/params", body, timeout, None)
    else:
        body = encode_control("pull", sender=PROBE_SENDER)
        data, nonce, why = await _post(session, addr, "params", body, timeout, signer)
    if data is None:
        return None, why
    try:
        opener = None if operator is not None else signer  # admin answers travel bare
        vec = await asyncio.to_thread(_open_params, opener, data, nonce)
    except AuthError as exc:
        return None, f"unauthenticated answer: {exc}"
    except Exception as exc:  # a malformed payload is the peer's fault: record it, go on
        return None, f"bad payload: {exc}"
    return vec, ""


def _open_params(signer: Signer | None, data: bytes, nonce: bytes) -> np.ndarray:
    """Authenticate (with a secret) and decode a params answer; heavy: run in a thread."""
    if signer is not None:
        data = signer.open("params", data, reply_to=nonce)
    _header, vec = decode_params(data)
    return np.asarray(vec)


async def post_admin(
    session: aiohttp.ClientSession,
    addr: str,
    route: str,
    body: bytes,
    timeout: float,
    operator: OperatorKey | None = None,
) -> str:
    """POST an admin request, signed by the `operator` key for this peer (peers started with
    --enable-admin obey nothing else); "" on success, else why it failed (never raises)."""
    full = f"admin/{route}"
    if operator is not None:
        body = operator.sign(full, body, to=addr)
    data, _nonce, why = await _post(session, addr, full, body, timeout, None)
    return why if data is None else ""


async def _post(
    session: aiohttp.ClientSession,
    addr: str,
    route: str,
    body: bytes,
    timeout: float,
    signer: Signer | None,
) -> tuple[bytes | None, bytes, str]:
    """(answer, request nonce, "") or (None, b"", why): one POST /v1/<route>, sealed when
    `signer` is given (the nonce is what the sealed answer is bound to)."""
    nonce = b""
    if signer is not None:
        sealed = signer.seal(route, body, to=addr)  # bound to this peer: no replay elsewhere
        nonce, body = nonce_of(sealed), bytes(sealed)
    try:
        async with session.post(
            _url(addr, route), data=body, timeout=aiohttp.ClientTimeout(total=timeout)
        ) as resp:
            if resp.status != 200:
                text = (await resp.text(errors="replace"))[:200]
                return None, b"", f"HTTP {resp.status}: {' '.join(text.split())}".rstrip(": ")
            return await resp.read(), nonce, ""
    except asyncio.TimeoutError:
        return None, b"", "timeout"
    except (aiohttp.ClientError, OSError) as exc:
        return None, b"", f"unreachable: {type(exc).__name__}: {exc}".rstrip(": ")


def fault_body(fault: Any) -> bytes:
    """admin/fault body: the `FaultConfig` as its `--fault` spec text (which swarmnode.node.peer.admin_routes
    reads first) and as the equivalent map."""
    return encode_control(
        "fault", sender=PROBE_SENDER, spec=fault.to_spec(), config=fault.to_dict()
    )


def byzantine_body(kind: str | None) -> bytes:
    """admin/byzantine body; `kind` None makes the peer honest again."""
    return encode_control("byzantine", sender=PROBE_SENDER, kind=kind)


def slowdown_body(factor: float) -> bytes:
    return encode_control("slowdown", sender=PROBE_SENDER, factor=float(factor))


def max_pairwise_distance(vectors: Sequence[np.ndarray]) -> float | None:
    """Largest Euclidean distance between any two vectors (None for fewer than two).

    Differences are taken directly (relative to each other), never through the Gram expansion,
    which cancels to noise when models agree closely. Vectors of another size than the first are
    skipped (a peer answering with a wrong shape is a fault of its own); a non-finite model gives
    inf (an honest peer that diverged has not converged). Heavy: call in a worker thread.
    """
    rows = [np.asarray(v, dtype=np.float64).ravel() for v in vectors]
    rows = [r for r in rows if r.size == rows[0].size] if rows else []
    if len(rows) < 2:
        return None
    if not all(np.all(np.isfinite(r)) for r in rows):
        return math.inf
    return max(float(np.linalg.norm(a - b)) for a, b in itertools.combinations(rows, 2))


def relative_position(vec: np.ndarray, honest: Sequence[np.ndarray]) -> dict[str, Any] | None:
    """Where a served model lies relative to the honest ones (None: no comparable honest one).

    `nearest`: distance to the closest honest model; `from_mean`: to their coordinate-wise mean
    m; `honest_from_mean`: the honest models' own mean distance to m (their spread);
    `std_shift`: <m - vec, s> / <s, s> with s their coordinate-wise (population) std -- how many
    std's `vec` sits below the mean along the spread. An honest model's shift is ~0 (its
    deviation has no sign preference against s >= 0); a model crafted as m - z s (ALIE) shows z.
    Non-finite `vec`: inf distances and no shift. Heavy: call in a worker thread."""
    row = np.asarray(vec, dtype=np.float64).ravel()
    rows = [np.asarray(h, dtype=np.float64).ravel() for h in honest]
    rows = [r for r in rows if r.size == row.size and np.all(np.isfinite(r))]
    if not rows:
        return None
    if not np.all(np.isfinite(row)):
        return {"nearest": math.inf, "from_mean": math.inf, "std_shift": None}
    views = np.stack(rows)
    mean, std = views.mean(axis=0), views.std(axis=0)
    spread = float(np.dot(std, std))
    return {
        "nearest": min(float(np.linalg.norm(row - r)) for r in rows),
        "from_mean": float(np.linalg.norm(row - mean)),
        "honest_from_mean": float(np.mean([np.linalg.norm(r - mean) for r in rows])),
        "std_shift": float(np.dot(mean - row, std)) / spread if spread > 0 else None,
    }
