"""Runtime fault control: `POST /v1/admin/{fault,byzantine,slowdown}`; `admin/params` reads the
model (the chaos probe's distances: `params` serves members only, and the operator is none).

The chaos runner turns faults on and off in running peers through these routes. They exist to
sabotage a peer, so they are off unless the peer was started with them enabled (`enable_admin`;
`Node` then serves these routes, else they are 404 like any unknown path), and every request
must be signed by the operator's Ed25519 key and addressed to this peer (gossip/auth/operator.py says
why neither loopback nor the swarm secret is enough). There is no unsigned mode: on a shared
host, "loopback only" meant "any local user".
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, Protocol

from aiohttp import web
from swarmnode.fault.inject import FaultConfig, parse_fault_spec
from swarmnode.gossip.wire import decode_control, encode_control, require
from swarmnode.kernels.errors import SwarmnodeError
from swarmnode.node.net import IntakeLimits, local_addr, read_body, read_on_time
from swarmnode.node.train import MAX_STEP_S

if TYPE_CHECKING:
    from swarmnode.fault.inject import FaultyTransport
    from swarmnode.gossip.auth import OperatorVerifier
    from swarmnode.gossip.exchange import Exchanger
    from swarmnode.node.peer.byzantine_serving import ByzantineServing
    from swarmnode.node.train import TrainingWorker

log = logging.getLogger(__name__)


class AdminTarget(Protocol):
    """What the admin routes change in a peer (the `Node` implements it)."""

    operator: OperatorVerifier | None
    faults: FaultyTransport
    byzantine: ByzantineServing
    worker: TrainingWorker
    exchanger: Exchanger


MAX_ADMIN_BYTES = 64 * 1024


def admin_routes(node: AdminTarget) -> list[web.RouteDef]:
    """The admin routes; the caller adds them only when admin is enabled."""
    return [
        web.post("/v1/admin/fault", _guarded(node, "admin/fault", _set_fault)),
        web.post("/v1/admin/byzantine", _guarded(node, "admin/byzantine", _set_byzantine)),
        web.post("/v1/admin/slowdown", _guarded(node, "admin/slowdown", _set_slowdown)),
        web.post("/v1/admin/params", _guarded(node, "admin/params", _read_params)),
    ]


# an action answers a map (sent as an "ok" control message) or raw bytes (a parameter frame)
Action = Callable[[AdminTarget, dict[str, Any]], Awaitable[Any]]


def _guarded(
    node: AdminTarget, route: str, action: Action
) -> Callable[[web.Request], Awaitable[web.Response]]:
    async def handler(request: web.Request) -> web.Response:
        try:
            if node.operator is None:  # enabled without a key: refused by config; be sure
                return _reject(request, route, 403, "admin routes need an operator key")
            # read_body, not content.read(n): read(n) returns whatever chunk has arrived, so a
            # body split over two TCP segments was cut short; and a Content-Length over the cap
            # is refused (413) before anything is read. Under the same delivery deadline as
            # every other route: a trickled admin body is cut off like any slow body.
            length = request.content_length
            body = bytes(
                await read_on_time(
                    lambda: read_body(request.content, length, MAX_ADMIN_BYTES),
                    length,
                    MAX_ADMIN_BYTES,
                    IntakeLimits(),
                )
            )
            body = node.operator.open(route, body, local_addr(request))
            msg = decode_control(body, route.split("/")[1])
            result = await action(node, msg)
            reply = encode_control("ok", **result) if isinstance(result, dict) else result
        except SwarmnodeError as exc:
            return _reject(request, route, getattr(exc, "status", 400), str(exc))
        except ConnectionError as exc:  # the caller hung up mid-body
            return _reject(request, route, 400, f"connection lost while reading the body: {exc}")
        return web.Response(body=bytes(reply), content_type="application/octet-stream")

    return handler


async def _set_fault(node: AdminTarget, msg: dict[str, Any]) -> dict[str, Any]:
    if "spec" in msg:
        cfg = parse_fault_spec(require(msg, "spec", str))
    else:
        cfg = FaultConfig.from_dict(require(msg, "config", dict))
    node.faults.set_config(cfg)
    # an injected fault is worth a WARNING in the logs it spoils; clearing it (a heal) is not
    if cfg.active:
        log.warning("faults set at runtime: %s", cfg.to_spec())
    else:
        log.info("faults cleared at runtime: healed")
    return {"faults": cfg.to_spec()}


async def _set_byzantine(node: AdminTarget, msg: dict[str, Any]) -> dict[str, Any]:
    kind = msg.get("kind")
    if kind is not None and not isinstance(kind, str):
        raise SwarmnodeError("field 'kind' must be a string or nil")
    node.byzantine.set(kind)
    if kind:
        log.warning("byzantine behaviour set at runtime: %s", kind)
    else:
        log.info("byzantine behaviour cleared at runtime: honest")
    return {"byzantine": node.byzantine.kind}


async def _read_params(node: AdminTarget, msg: dict[str, Any]) -> bytes:
    return bytes(await node.exchanger.serve_model())


async def _set_slowdown(node: AdminTarget, msg: dict[str, Any]) -> dict[str, Any]:
    factor = require(msg, "factor", (int, float))
    if not 1.0 <= float(factor) <= 1000.0:
        raise SwarmnodeError(f"slowdown factor must be in [1, 1000], got {factor}")
    step_s = msg.get("step_s", 0.0)  # optional: a fixed simulated step time (--step-time)
    if isinstance(step_s, bool) or not isinstance(step_s, (int, float)):
        raise SwarmnodeError("field 'step_s' must be a number")
    if not 0.0 <= float(step_s) <= MAX_STEP_S:
        raise SwarmnodeError(f"step_s must be in [0, {MAX_STEP_S:g}], got {step_s}")
    node.worker.set_throttle(slowdown=float(factor), step_s=float(step_s))
    return {"slowdown": float(factor), "step_s": float(step_s)}


def _reject(request: web.Request, route: str, status: int, why: str) -> web.Response:
    one_line = " ".join(why.split())[:500]
    log.warning("rejected /v1/%s from %s: %s %s", route, request.remote, status, one_line)
    return web.Response(status=status, text=one_line)
