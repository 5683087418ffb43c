"""The peer's aiohttp application: `POST /v1/{route}` for every protocol handler.

Handlers are the transport-neutral `route -> async (body) -> body` functions of gossip/ (the
same ones the in-memory network calls). This module adds what HTTP needs around them: body size
caps checked before reading, errors mapped to status codes with one log line each, a server that
keeps running whatever a peer sends, and a bulk path for 100 MB parameter bodies.

Bulk path (measured with scripts/bench_exchange.py; aiohttp's defaults reach 10-25% of raw
loopback TCP for a 100 MB push-pull):
- bodies are read into ONE preallocated, huge-page-backed buffer of the declared size
  (`swarmnode.node.net.transport.read_sized_body`), not collected and joined: handlers receive `bytes`
  up to 1 MiB and a writable `memoryview` beyond (treat the body as bytes-like, never assume
  `bytes`);
- the per-connection read buffer is raised from 64 KiB to `BULK_READ_BUFSIZE`: at 64 KiB the
  body stream pauses and resumes the socket after every 128 KiB, hundreds of selector
  round trips per model;
- large answers go out as a `StreamResponse` with a Content-Length, written in `SLICE_BYTES`
  memoryview slices with a drain after each: one `web.Response(body=...)` write makes
  Python < 3.12 join headers and body (a 100 MB copy) and then copy the unsent rest into the
  transport's buffer (a second one), all on the event loop.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

from aiohttp import web
from aiohttp.http_exceptions import HttpProcessingError
from swarmnode.gossip.transport import Handler
from swarmnode.kernels.errors import SwarmnodeError
from swarmnode.node.net.transport import read_sized_body

log = logging.getLogger(__name__)

CONTENT_TYPE = "application/octet-stream"
BULK_READ_BUFSIZE = 4 << 20  # per-connection StreamReader limit (aiohttp pauses at 2x this)
SLICE_BYTES = 1 << 20  # large answers are written in slices of this size
STREAM_ABOVE = 256 << 10  # answers larger than this take the sliced path
DEFAULT_CAP = 1 << 20  # a route missing from a per-route cap mapping (and no "*") gets this

_LOGGER = web.AppKey("swarmnode_logger", logging.Logger)


def build_app(
    handlers: Mapping[str, Handler],
    *,
    max_body_bytes: int | Mapping[str, int] = 1 << 30,
    extra_routes: Sequence[web.RouteDef] = (),
    logger: logging.Logger | None = None,
    read_bufsize: int = BULK_READ_BUFSIZE,
    admission: Mapping[str, int] | None = None,
) -> web.Application:
    """An app serving `POST /v1/{route}` for each of `handlers`.

    `handlers` is read at request time, so it may be filled after the server is bound (the node
    learns its address first). A handler gets the body as `bytes` (up to 1 MiB) or a
    writable `memoryview` (larger) and may return any C-contiguous bytes-like object. `max_body_bytes` is one cap for all routes, or per route
    with an optional `"*"` default. `extra_routes` adds the node's own routes (GET /v1/status,
    /metrics, admin). Rejections and failures are logged on `logger` (default: this module's).
    `admission` maps a bulk route to how many of its requests may be in flight at once; one
    more is answered 503 *before* its body is read and its connection closed, so a burst of
    100 MB pushes costs memory for the admitted ones only.
    """
    logger = logger or log
    app = web.Application(
        client_max_size=_largest(max_body_bytes),
        middlewares=[_log_unrouted(logger)],
        handler_args={"read_bufsize": read_bufsize},
    )
    app[_LOGGER] = logger
    app.add_routes(list(extra_routes))
    gates = {route: asyncio.Semaphore(n) for route, n in (admission or {}).items()}

    async def dispatch(request: web.Request) -> web.StreamResponse:
        route = request.match_info["route"]
        handler = handlers.get(route)
        if handler is None:
            return _reject(logger, request, route, 404, f"unknown route /v1/{route}")
        gate = gates.get(route)
        if gate is None:
            return await _handle(request, route, handler)
        if gate.locked():
            return _busy(logger, request, route)
        async with gate:
            return await _handle(request, route, handler)

    async def _handle(request: web.Request, route: str, handler: Handler) -> web.StreamResponse:
        cap = _cap(max_body_bytes, route)
        try:
            body = await read_sized_body(request.content, request.content_length, cap)
            answer = await handler(body)  # type: ignore[arg-type]  # bytes-like, see docstring
        except SwarmnodeError as exc:
            return _reject(logger, request, route, int(getattr(exc, "status", 400)), str(exc))
        except ConnectionError as exc:  # the client hung up mid-body: its problem, not a bug
            why = f"connection lost while reading the body: {exc}"
            return _reject(logger, request, route, 400, why)
        except Exception:  # a bug: log it with its traceback, answer 500, keep serving
            logger.exception(
                "handler for /v1/%s failed on a request from %s", route, request.remote
            )
            return web.Response(status=500, text="internal error")
        return await _answer(request, route, answer, logger)

    app.router.add_post("/v1/{route:[a-z0-9/_-]+}", dispatch)
    return app


async def _answer(
    request: web.Request, route: str, answer: Any, logger: logging.Logger
) -> web.StreamResponse:
    """Small answers in one write; large ones streamed in memoryview slices (no copies)."""
    view = memoryview(answer).cast("B")  # a bytes-like of any format, as bytes
    if view.nbytes <= STREAM_ABOVE:
        body = answer if isinstance(answer, bytes) else view.tobytes()
        return web.Response(body=body, content_type=CONTENT_TYPE)
    resp = web.StreamResponse(headers={"Content-Type": CONTENT_TYPE})
    resp.content_length = view.nbytes
    try:
        await resp.prepare(request)
        for start in range(0, view.nbytes, SLICE_BYTES):
            await resp.write(view[start : start + SLICE_BYTES])  # drains once past 64 KiB
        await resp.write_eof()
    except ConnectionError as exc:  # the caller left before taking the whole answer
        logger.warning(
            "answer to /v1/%s for %s cut short: %s", route, request.remote, _one_line(str(exc))
        )
    return resp


async def serve(
    app: web.Application, host: str, port: int, *, shutdown_timeout: float = 5.0
) -> tuple[web.AppRunner, int]:
    """Bind and start `app`; returns the runner and the bound port (port 0 picks a free one).

    The caller owns the runner and must `await runner.cleanup()` on shutdown: it stops
    accepting, gives requests in flight `shutdown_timeout` seconds (aiohttp's default, 60 s,
    would hold a leaving peer hostage to one slow 100 MB exchange), then cancels them.
    """
    logger = app.get(_LOGGER, log)
    runner = web.AppRunner(
        app,
        access_log=None,
        handle_signals=False,
        shutdown_timeout=shutdown_timeout,
        logger=_OneLineServerLog(_server_log, {"swarmnode_logger": logger}),
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
    return caps if isinstance(caps, int) else max(caps.values(), default=DEFAULT_CAP)


def _cap(caps: int | Mapping[str, int], route: str) -> int:
    if isinstance(caps, int):
        return caps
    return caps.get(route, caps.get("*", DEFAULT_CAP))


def _one_line(text: str, limit: int = 500) -> str:
    return " ".join(text.split())[:limit]


def _busy(logger: logging.Logger, request: web.Request, route: str) -> web.Response:
    """503 without reading the body; the connection is closed rather than drained, so the
    refused body is never read. Back-pressure is routine: one INFO line, not a warning."""
    logger.info("busy: refused /v1/%s from %s (too many in flight)", route, request.remote)
    resp = web.Response(status=503, text="busy: too many exchanges in flight, try another peer")
    resp.force_close()
    return resp


def _reject(
    logger: logging.Logger, request: web.Request, route: str, status: int, why: str
) -> web.Response:
    one_line = _one_line(why)
    logger.warning("rejected /v1/%s from %s: %s %s", route, request.remote, status, one_line)
    return web.Response(status=status, text=one_line)


Endpoint = Callable[[web.Request], Awaitable[web.StreamResponse]]


def _log_unrouted(logger: logging.Logger) -> Any:
    """The router's own 404/405 (no such path, wrong method) get the same one line as ours."""

    @web.middleware
    async def middleware(request: web.Request, handler: Endpoint) -> web.StreamResponse:
        try:
            return await handler(request)
        except web.HTTPException as exc:
            if 400 <= exc.status < 500:
                logger.warning(
                    "rejected %s %s from %s: %s %s",
                    request.method,
                    request.path[:200],
                    request.remote,
                    exc.status,
                    exc.reason,
                )
            raise

    return middleware


_server_log = logging.getLogger("aiohttp.server")


class _OneLineServerLog(logging.LoggerAdapter):  # type: ignore[type-arg]
    """aiohttp's server logger, with malformed HTTP (a bad chunk size, a negative Content-Length)
    logged as one warning line instead of an ERROR with a traceback: a peer on a network must
    expect such requests, and aiohttp answers them 400 by itself. Real bugs keep their traceback.
    """

    def exception(self, msg: object, *args: object, exc_info: Any = True, **kw: Any) -> None:
        if isinstance(exc_info, HttpProcessingError):
            why = _one_line(str(exc_info.message), 200)
            remote = args[0] if args else "?"
            target = (self.extra or {}).get("swarmnode_logger", log)
            target.warning(
                "rejected a malformed HTTP request from %s: %s %s", remote, exc_info.code, why
            )
            return
        super().exception(msg, *args, exc_info=exc_info, **kw)


__all__: list[Any] = ["ListenError", "build_app", "serve"]
