"""The peer's aiohttp application: `POST /v1/{route}` for every protocol handler.

Handlers are the transport-neutral `route -> async (body) -> body` functions of gossip/ (the
same ones the in-memory network calls). This module adds what HTTP needs around them: body size
caps checked before reading, errors mapped to status codes with one log line each, and a server
that keeps running whatever a peer sends.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

from aiohttp import web

from gossip.transport import Handler
from kernels.errors import SwarmnodeError
from node.http_body import read_body

log = logging.getLogger(__name__)

CONTENT_TYPE = "application/octet-stream"


def build_app(
    handlers: Mapping[str, Handler],
    *,
    max_body_bytes: int | Mapping[str, int] = 1 << 30,
    extra_routes: Sequence[web.RouteDef] = (),
) -> web.Application:
    """An app serving `handlers` (read at request time, so it may be filled after binding)."""
    app = web.Application(client_max_size=_largest(max_body_bytes))
    app.add_routes(list(extra_routes))

    async def dispatch(request: web.Request) -> web.StreamResponse:
        route = request.match_info["route"]
        handler = handlers.get(route)
        if handler is None:
            return _reject(request, route, 404, f"unknown route /v1/{route}")
        cap = _cap(max_body_bytes, route)
        try:
            body = await read_body(request.content, request.content_length, cap)
            answer = await handler(body)
        except SwarmnodeError as exc:
            return _reject(request, route, int(getattr(exc, "status", 400)), str(exc))
        except Exception:  # a bug: log it with its traceback, answer 500, keep serving
            log.exception("handler for /v1/%s failed on a request from %s", route, request.remote)
            return web.Response(status=500, text="internal error")
        return web.Response(body=answer, content_type=CONTENT_TYPE)

    app.router.add_post("/v1/{route:[a-z/-]+}", dispatch)
    return app


async def serve(app: web.Application, host: str, port: int) -> tuple[web.AppRunner, int]:
    """Bind and start `app`; returns the runner (cleanup() it) and the bound port."""
    runner = web.AppRunner(app, access_log=None, handle_signals=False)
    await runner.setup()
    site = web.TCPSite(runner, host, port, reuse_address=True)
    try:
        await site.start()
    except OSError as exc:
        await runner.cleanup()
        raise ListenError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None
    sockets = site._server.sockets if site._server else []  # aiohttp exposes no public getter
    bound = sockets[0].getsockname()[1] if sockets else port
    return runner, bound


class ListenError(SwarmnodeError):
    """The listen address is taken or not ours."""


def _largest(caps: int | Mapping[str, int]) -> int:
    return caps if isinstance(caps, int) else max(caps.values(), default=1 << 20)


def _cap(caps: int | Mapping[str, int], route: str) -> int:
    if isinstance(caps, int):
        return caps
    return caps.get(route, caps.get("*", 1 << 20))


def _reject(request: web.Request, route: str, status: int, why: str) -> web.Response:
    one_line = " ".join(why.split())[:500]
    log.warning("rejected /v1/%s from %s: %s %s", route, request.remote, status, one_line)
    return web.Response(status=status, text=one_line)


__all__: list[Any] = ["ListenError", "build_app", "serve"]
