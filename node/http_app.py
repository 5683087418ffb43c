"""The peer's aiohttp application: `POST /v1/{route}` for every protocol handler.

Handlers are the transport-neutral `route -> async (body) -> body` functions of gossip/ (the
same ones the in-memory network calls). This module adds what HTTP needs around them: body size
caps checked before reading, errors mapped to status codes with one log line each, and a server
that keeps running whatever a peer sends.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

from aiohttp import web
from aiohttp.http_exceptions import HttpProcessingError

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
    app = web.Application(client_max_size=_largest(max_body_bytes), middlewares=[_log_unrouted])
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
        except ConnectionError as exc:  # the client hung up mid-body: its problem, not a bug
            return _reject(request, route, 400, f"connection lost while reading the body: {exc}")
        except Exception:  # a bug: log it with its traceback, answer 500, keep serving
            log.exception("handler for /v1/%s failed on a request from %s", route, request.remote)
            return web.Response(status=500, text="internal error")
        return web.Response(body=answer, content_type=CONTENT_TYPE)

    app.router.add_post("/v1/{route:[a-z/-]+}", dispatch)
    return app


async def serve(app: web.Application, host: str, port: int) -> tuple[web.AppRunner, int]:
    """Bind and start `app`; returns the runner (cleanup() it) and the bound port."""
    runner = web.AppRunner(
        app, access_log=None, handle_signals=False, logger=_OneLineServerLog(_server_log, {})
    )
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


@web.middleware
async def _log_unrouted(
    request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
) -> web.StreamResponse:
    """The router's own 404/405 (no such path, wrong method) get the same one line as ours."""
    try:
        return await handler(request)
    except web.HTTPException as exc:
        if 400 <= exc.status < 500:
            log.warning(
                "rejected %s %s from %s: %s %s",
                request.method,
                request.path[:200],
                request.remote,
                exc.status,
                exc.reason,
            )
        raise


_server_log = logging.getLogger("aiohttp.server")


class _OneLineServerLog(logging.LoggerAdapter):  # type: ignore[type-arg]
    """aiohttp's server logger, with malformed HTTP (a bad chunk size, a negative Content-Length)
    logged as one warning line instead of an ERROR with a traceback: a peer on a network must
    expect such requests, and aiohttp answers them 400 by itself. Real bugs keep their traceback.
    """

    def exception(self, msg: object, *args: object, exc_info: Any = True, **kw: Any) -> None:
        if isinstance(exc_info, HttpProcessingError):
            why = " ".join(str(exc_info.message).split())[:200]
            remote = args[0] if args else "?"
            log.warning(
                "rejected a malformed HTTP request from %s: %s %s", remote, exc_info.code, why
            )
            return
        super().exception(msg, *args, exc_info=exc_info, **kw)


__all__: list[Any] = ["ListenError", "build_app", "serve"]
