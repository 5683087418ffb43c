"""The peer's aiohttp application: `POST /v1/{route}` for every protocol handler.

Handlers are the transport-neutral `route -> async (body) -> body` functions of gossip/ (the
same ones the in-memory network calls). This module adds what HTTP needs around them: body size
caps checked before reading, errors mapped to status codes with one log line each, a server that
keeps running whatever a peer sends, and a bulk path for 100 MB parameter bodies.

Bulk path (aiohttp's defaults reach a small share of raw loopback TCP for a 100 MB push-pull;
scripts/bench/exchange/throughput.py measures it, docs/benchmarks.md "Exchange throughput" has the
figures):
- bodies are read into ONE preallocated, huge-page-backed buffer of the declared size
  (`swarmnode.node.net.transport.read_sized_body`), not collected and joined: handlers receive `bytes`
  up to 1 MiB and a writable `memoryview` beyond (treat the body as bytes-like, never assume
  `bytes`);
- the per-connection read buffer is raised from 64 KiB to `BULK_READ_BUFSIZE`: at 64 KiB the
  body stream pauses and resumes the socket after every 128 KiB, hundreds of selector
  round trips per model;
- large answers go out as a `StreamResponse` with a Content-Length, written in 1 MiB
  memoryview slices with a drain after each: one `web.Response(body=...)` write makes
  Python < 3.12 join headers and body (a 100 MB copy) and then copy the unsent rest into the
  transport's buffer (a second one), all on the event loop.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

from aiohttp import web
from aiohttp.http_exceptions import HttpProcessingError
from swarmnode.gossip.errors import AuthError, NotAMember
from swarmnode.gossip.link import (
    Arrival,
    Handler,
    Tap,
    Trailed,
    body_views,
    completed,
    is_takes_arriving,
)
from swarmnode.kernels.errors import SwarmnodeError
from swarmnode.node.net.body import BodyCut, BodyError
from swarmnode.node.net.intake import ByteBudget, IntakeLimits, Meter, RemoteSlots, read_on_time
from swarmnode.node.net.transport import INLINE_BYTES, read_sized_body, write_body

log = logging.getLogger(__name__)

CONTENT_TYPE = "application/octet-stream"
BULK_READ_BUFSIZE = 4 << 20  # per-connection StreamReader limit (aiohttp pauses at 2x this)
STREAM_ABOVE = 256 << 10  # answers larger than this take the sliced path
DEFAULT_CAP = 1 << 20  # a route missing from a per-route cap mapping (and no "*") gets this
HEAD_REFUSAL_LINGER_S = 0.25  # a streamed request refused at its head: closed after this

_LOGGER = web.AppKey("swarmnode_logger", logging.Logger)
# A refusal that is part of a healthy swarm's life, not a fault: a handler's 503 (joining: state
# sync not finished, leaving) at DEBUG; a stranger (a request signed by no live member: a joiner
# we have not heard of yet, a peer that has just left) at INFO once per address a minute.
STRANGER_QUIET_S = 60.0
_STRANGERS_KEPT = 1024


def build_app(
    handlers: Mapping[str, Handler],
    *,
    max_body_bytes: int | Mapping[str, int] = 1 << 30,
    extra_routes: Sequence[web.RouteDef] = (),
    logger: logging.Logger | None = None,
    read_bufsize: int = BULK_READ_BUFSIZE,
    admission: Mapping[str, int] | None = None,
    intake: IntakeLimits | None = None,
    tap: Callable[[str], Tap | None] | None = None,
) -> web.Application:
    """An app serving `POST /v1/{route}` for each of `handlers`.

    `handlers` is read at request time, so it may be filled after the server is bound (the node
    learns its address first). A handler gets an `Arrival`: the body as `bytes` (up to 1 MiB) or
    a writable `memoryview` (larger), the remote address, the local "host:port" the request came
    in on, when it arrived, and the tap that watched it; it may return any C-contiguous
    bytes-like object.
    `max_body_bytes` is one cap for all routes, or per route with an optional `"*"` default.
    `extra_routes` adds the node's own routes (GET /v1/status, /metrics, admin). Rejections and
    failures are logged on `logger` (default: this module's).

    Every body is first delivered under `intake`'s deadline and byte budget (node/net/intake.py
    says why); only then does a request take a slot: `admission` maps a bulk route to how many
    of its requests may be handled at once, and `intake.per_remote` caps those from one remote
    address. One more is answered 503. `tap(route)`, if given, makes a `Tap` (or None) that watches
    each large body on that route arrive (gossip.auth.signer's streaming digest); the handler
    finds it in `Arrival.tap`.
    """
    logger = logger or log
    limits = intake or IntakeLimits()
    app = web.Application(
        client_max_size=_largest(max_body_bytes),
        middlewares=[_log_unrouted(logger)],
        handler_args={"read_bufsize": read_bufsize},
    )
    app[_LOGGER] = logger
    app.add_routes(list(extra_routes))
    gates = {route: asyncio.Semaphore(n) for route, n in (admission or {}).items()}
    strangers = _Strangers()
    budget = ByteBudget(limits.budget_bytes)
    remotes = RemoteSlots(limits.per_remote)

    async def dispatch(request: web.Request) -> web.StreamResponse:
        route = request.match_info["route"]
        handler = handlers.get(route)
        if handler is None:
            return _reject(logger, request, route, 404, f"unknown route /v1/{route}")
        meter = budget.meter()
        length = request.content_length
        watch = tap(route) if tap is not None and (length or 0) > INLINE_BYTES else None
        try:
            return await _deliver_then_handle(request, route, handler, meter, watch)
        finally:
            meter.release()  # the body (and the answer built from it) is no longer ours
            if watch is not None:  # its hashing jobs read the body: none outlives the request
                watch.abort()
                await watch.settle()

    async def _deliver_then_handle(
        request: web.Request, route: str, handler: Handler, meter: Meter, watch: Tap | None
    ) -> web.StreamResponse:
        cap = _cap(max_body_bytes, route)
        length = request.content_length
        feed = watch.feed if watch is not None else None
        align = getattr(watch, "body_offset", None)

        def read() -> Awaitable[bytes | memoryview]:
            return read_sized_body(request.content, length, cap, meter.take, feed, align)

        async def deliver() -> bytes | memoryview:
            try:
                return await read_on_time(read, length, cap, limits)  # type: ignore[return-value]
            except ConnectionError as exc:  # the client hung up mid-body: its problem, not a bug
                raise BodyCut(f"connection lost while reading the body: {exc}") from None

        reading = asyncio.ensure_future(deliver())
        try:
            if is_takes_arriving(handler) and hasattr(watch, "head"):
                return await _stream_then_handle(request, route, handler, reading, watch)
            return await _delivered(request, route, handler, reading, watch)
        finally:
            if not reading.done():
                reading.cancel()
            await asyncio.gather(reading, return_exceptions=True)

    async def _delivered(
        request: web.Request,
        route: str,
        handler: Handler,
        reading: asyncio.Future[Any],
        watch: Tap | None,
    ) -> web.StreamResponse:
        """The handler, once the whole body is in (or the refusal of a body that never was)."""
        try:
            body = await reading
        except BodyError as exc:
            # routine (INFO): a slow or unbudgeted body (its connection is dropped), or a peer
            # that left or died with a request in flight (the survivors logged it as a
            # WARNING after a clean SIGINT leave)
            refused = _reject(logger, request, route, exc.status, str(exc), info=exc.routine)
            if exc.status in (408, 503):
                return await _cut_off(request, refused)
            return refused
        return await _admit_then_handle(request, route, handler, _arrival(request, body, watch))

    async def _stream_then_handle(
        request: web.Request,
        route: str,
        handler: Handler,
        reading: asyncio.Future[Any],
        watch: Any,
    ) -> web.StreamResponse:
        """A large enveloped body: the handler runs as soon as its envelope's head is in (it
        verifies the head, may start its answer, and awaits `arriving` for the rest). Any
        answer given before the body is whole and good is followed by closing the connection:
        the unread rest of the body must not be read as the next request."""
        heading = asyncio.ensure_future(watch.head())
        try:
            await asyncio.wait({reading, heading}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            heading.cancel()
        if reading.done() or not heading.done() or heading.cancelled():
            return await _delivered(request, route, handler, reading, watch)
        arrival = _arrival(request, heading.result(), watch, arriving=reading)
        resp = await _admit_then_handle(request, route, handler, arrival)
        if reading.done() and not reading.cancelled() and reading.exception() is None:
            return resp
        if not reading.done():
            reading.cancel()
        if isinstance(resp, web.Response) and not resp.prepared:
            # refused at its head, most of its body unread: closing the socket on unread bytes
            # makes the kernel reset it, which may discard the refusal before the client reads
            # it (a member dropped from the table mid-round would see "connection reset", not
            # "not a live member"); a short pause lets it read the refusal first
            return await _cut_off(request, resp, linger=HEAD_REFUSAL_LINGER_S)
        if request.protocol is not None:  # an answer already sent (or cut short): close
            request.protocol.force_close()
        return resp

    async def _admit_then_handle(
        request: web.Request, route: str, handler: Handler, arrival: Arrival
    ) -> web.StreamResponse:
        gate = gates.get(route)
        if gate is None:
            return await _handle(request, route, handler, arrival)
        remote = request.remote or "?"
        if gate.locked() or not remotes.enter(remote):
            return _busy(logger, request, route)
        try:
            async with gate:
                return await _handle(request, route, handler, arrival)
        finally:
            remotes.leave(remote)

    async def _handle(
        request: web.Request, route: str, handler: Handler, arrival: Arrival
    ) -> web.StreamResponse:
        try:
            answer = await handler(arrival)
        except SwarmnodeError as exc:
            status = int(getattr(exc, "status", 400))
            stranger = isinstance(exc, AuthError) and (
                status == NotAMember.status or getattr(exc, "stranger", False)
            )
            said = getattr(exc, "said", False)  # its raiser logged it (once per sender)
            if status == 503 or said or (stranger and not strangers.first(request.remote or "?")):
                # not now (joining, leaving): the join or leave itself is logged, once
                return _reject(logger, request, route, status, str(exc), level=logging.DEBUG)
            # a body that streamed in behind a verified head and then failed (slow, cut)
            routine = stranger or (isinstance(exc, BodyError) and exc.routine)
            return _reject(logger, request, route, status, str(exc), info=routine)
        except Exception:  # a bug: log it with its traceback, answer 500, keep serving
            logger.exception(
                "handler for /v1/%s failed on a request from %s", route, request.remote
            )
            return web.Response(status=500, text="internal error")
        return await _answer(request, route, answer, logger)

    app.router.add_post("/v1/{route:[a-z0-9/_-]+}", dispatch)
    return app


def _arrival(
    request: web.Request, body: Any, watch: Tap | None, arriving: Awaitable[Any] | None = None
) -> Arrival:
    return Arrival(
        body,
        remote=request.remote or "?",
        local=local_addr(request),
        at=time.monotonic(),
        tap=watch,  # gossip.auth.signer takes the digest the tap computed while the body arrived
        arriving=arriving,
    )


def local_addr(request: web.Request) -> str:
    """ "host:port" of our end of the request's TCP connection: the address it was sent to."""
    transport = request.transport
    sock = transport.get_extra_info("sockname") if transport is not None else None
    if not sock:
        return ""
    host, port = sock[0], sock[1]
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


async def _answer(
    request: web.Request, route: str, answer: Any, logger: logging.Logger
) -> web.StreamResponse:
    """Small answers in one write; large ones (bytes-like, `Parts`: an envelope's head, body
    and trailer, or `Trailed`: the same with the trailer computed while the rest goes out)
    streamed in memoryview slices (no copies). A `Gated` answer (given while its request still
    arrived) whose request is refused after all is cut off, with one line saying why."""
    resp: web.StreamResponse | None = None
    try:
        size = len(answer) if isinstance(answer, Trailed) else _nbytes(answer)
        if size <= STREAM_ABOVE:
            views = body_views(await completed(answer))  # a bytes-like of any format, as bytes
            body = answer if isinstance(answer, bytes) else b"".join(views)
            return web.Response(body=body, content_type=CONTENT_TYPE)
        resp = web.StreamResponse(headers={"Content-Type": CONTENT_TYPE})
        resp.content_length = size
        try:
            await resp.prepare(request)
            await write_body(resp, answer)
            await resp.write_eof()
        except ConnectionError as exc:  # the caller left before taking the whole answer
            logger.warning(
                "answer to /v1/%s for %s cut short: %s", route, request.remote, _one_line(str(exc))
            )
        return resp
    except SwarmnodeError as exc:  # the request, refused once its body was in: no answer
        status = int(getattr(exc, "status", 400))
        routine = isinstance(exc, BodyError) and exc.routine
        refused = _reject(logger, request, route, status, f"{exc} (answer cut off)", info=routine)
        if resp is None or not resp.prepared:
            return refused
        if request.protocol is not None:
            request.protocol.force_close()
        return resp
    finally:
        if isinstance(answer, Trailed):  # its hashing reads the body: none outlives the answer
            await answer.close()


def _nbytes(answer: Any) -> int:
    return sum(v.nbytes for v in body_views(answer))


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


async def _cut_off(request: web.Request, resp: web.Response, linger: float = 0.0) -> web.Response:
    """Send `resp`, then close the connection at once (after `linger` seconds, reading
    nothing). `resp.force_close()` alone is not enough: aiohttp then "lingers", reading the
    unread body for up to 10 s, which is exactly what a trickled body wants. The transport
    flushes the answer before it closes."""
    resp.force_close()  # "Connection: close": the client must not reuse it
    await resp.prepare(request)
    await resp.write_eof()
    if linger > 0:
        await asyncio.sleep(linger)
    if request.protocol is not None:
        request.protocol.force_close()
    return resp


def _busy(logger: logging.Logger, request: web.Request, route: str) -> web.Response:
    """503 once the body is delivered (it was read within the byte budget; the connection stays
    usable). Back-pressure is routine: one INFO line, not a warning."""
    logger.info("busy: refused /v1/%s from %s (too many in flight)", route, request.remote)
    return web.Response(status=503, text="busy: too many exchanges in flight, try another peer")


def _reject(
    logger: logging.Logger,
    request: web.Request,
    route: str,
    status: int,
    why: str,
    *,
    info: bool = False,
    level: int | None = None,
) -> web.Response:
    """One log line and a 4xx/5xx answer. `info`: routine (a slow or unbudgeted body is cut
    off many times a second under attack; a warning each would flood the log)."""
    one_line = _one_line(why)
    if level is None:
        level = logging.INFO if info else logging.WARNING
    logger.log(level, "rejected /v1/%s from %s: %s %s", route, request.remote, status, one_line)
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
                # outside /v1/ (a browser's GET /, a scanner): nothing a peer sent, nothing to fix
                ours = request.path.startswith("/v1/")
                logger.log(
                    logging.WARNING if ours else logging.INFO,
                    "rejected %s %s from %s: %s %s",
                    request.method,
                    request.path[:200],
                    request.remote,
                    exc.status,
                    exc.reason,
                )
            raise

    return middleware


class _Strangers:
    """Which addresses had a stranger's refusal logged in the last `STRANGER_QUIET_S`."""

    def __init__(self) -> None:
        self._last: dict[str, float] = {}

    def first(self, remote: str) -> bool:
        now = time.monotonic()
        last = self._last.get(remote)
        if last is not None and now - last < STRANGER_QUIET_S:
            return False
        if len(self._last) >= _STRANGERS_KEPT:
            self._last.clear()  # a flood of addresses: forget, log again (bounded memory)
        self._last[remote] = now
        return True


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


__all__: list[Any] = ["IntakeLimits", "ListenError", "build_app", "local_addr", "serve"]
