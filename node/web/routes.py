"""The page's routes, all `GET`, none of which changes anything:

- `/`: the page (static/index.html); `/web/{file}`: its script, style and the vendored chart
  library, from a fixed list (no path is ever built from the request);
- `/v1/watch`: the live stream (Server-Sent Events): a `hello` (snapshot, chart history, recent
  events), then a frame a second while the viewer stays; seats per address, 503 beyond
  (node/web/watch.py); a viewer that stops reading (a frame not taken within `STALL_S`) is
  dropped, so a held stream does not keep its seat;
- `/v1/watch/now`: the current snapshot as JSON (`swarmnode status --watch` polls it);
- `/v1/figures`: this peer's own figures and its recent local events, what the other peers'
  watches fetch.

What an outsider reads (issue 34): in an open swarm, everything, as `/v1/status`. In a closed
swarm (`--secret`), the page and its files (they hold no figures), and nothing of the three data
routes: 401 unless the request comes from this machine or carries the swarm's read token
(node/web/access.py says how, and why that is enough).

Every answer carries a Content-Security-Policy that allows only this origin's own script and
style: the page shows names and texts other peers wrote, and draws them as text, never markup.
"""

from __future__ import annotations

import asyncio
import socket
import time
from collections.abc import Callable
from importlib import resources
from typing import Any

from aiohttp import web
from swarmnode.node.web.access import Access, refused, seat_of
from swarmnode.node.web.events import EventLog
from swarmnode.node.web.figures import MAX_EVENTS
from swarmnode.node.web.watch import Busy, SwarmWatch

# name under /web/ -> (file under static/, content type)
STATIC = {
    "app.js": ("app.js", "text/javascript; charset=utf-8"),
    "style.css": ("style.css", "text/css; charset=utf-8"),
    "uPlot.iife.min.js": ("vendor/uPlot.iife.min.js", "text/javascript; charset=utf-8"),
    "uPlot.min.css": ("vendor/uPlot.min.css", "text/css; charset=utf-8"),
}
PAGE = ("index.html", "text/html; charset=utf-8")
STALL_S = 10.0  # a frame the viewer has not taken within this long ends its stream
STREAM_SNDBUF = 32 * 1024  # the stream's socket buffer: a viewer that stops reading fills it soon

SECURITY_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; "
        "img-src 'self' data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
    ),
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
}


def static_file(name: str) -> bytes:
    """A file under node/web/static/, from the installed package (the wheel ships them)."""
    return resources.files("swarmnode.node.web").joinpath("static", name).read_bytes()


def web_routes(
    watch: SwarmWatch,
    figures: Callable[[], dict[str, Any] | None],
    events: EventLog,
    access: Access | None = None,
) -> list[web.RouteDef]:
    """The page's routes over `watch`; `figures()` is this peer's own `self` of /v1/status
    (None while it starts), `events` its event log, `access` who may read (default: an open
    swarm's rules)."""
    access = access or Access()
    files = {name: (static_file(path), kind) for name, (path, kind) in STATIC.items()}
    page = static_file(PAGE[0])

    async def index(_request: web.Request) -> web.Response:
        return _file(page, PAGE[1], cache="no-cache")

    async def asset(request: web.Request) -> web.Response:
        found = files.get(request.match_info["name"])
        if found is None:
            raise web.HTTPNotFound(text="no such file")
        return _file(found[0], found[1], cache="max-age=300")

    async def own_figures(request: web.Request) -> web.Response:
        if not access.may_read(request):
            return refused()
        me = figures()
        if me is None:
            return _starting()
        local = [e.to_json() for e in events.recent(MAX_EVENTS, local_only=True)]
        return web.json_response({"t": time.time(), "self": me, "events": local})

    async def now(request: web.Request) -> web.Response:
        if not access.may_read(request):
            return refused()
        snap = await watch.now()
        if snap is None:
            return _starting()
        recent = watch.recent_events()
        return web.json_response({**snap, "events": recent}, headers=SECURITY_HEADERS)

    async def stream(request: web.Request) -> web.StreamResponse:
        if not access.may_read(request):
            return refused()
        headers = {"Content-Type": "text/event-stream", "Cache-Control": "no-cache"}
        resp = web.StreamResponse(headers={**headers, **SECURITY_HEADERS})
        trusted = access.trusted(request)
        try:
            async with watch.viewer(seat_of(request.remote), trusted=trusted) as frames:
                _small_send_buffer(request)
                await resp.prepare(request)
                async for frame in frames:
                    # a viewer that reads nothing fills the buffers, then this write waits
                    await asyncio.wait_for(resp.write(frame), STALL_S)
        except Busy as exc:
            return web.Response(status=503, text=str(exc), headers=SECURITY_HEADERS)
        except (ConnectionError, asyncio.TimeoutError):  # the viewer left, or stopped reading
            pass
        return resp

    return [
        web.get("/", index),
        web.get("/web/{name}", asset),
        web.get("/v1/figures", own_figures),
        web.get("/v1/watch", stream),
        web.get("/v1/watch/now", now),
    ]


def _file(body: bytes, kind: str, *, cache: str) -> web.Response:
    headers = {"Content-Type": kind, "Cache-Control": cache, **SECURITY_HEADERS}
    return web.Response(body=body, headers=headers)


def _small_send_buffer(request: web.Request) -> None:
    """Keep the kernel's buffering of a stream small, so that a viewer that stops reading is
    found out within a few frames, not after megabytes."""
    sock = request.transport.get_extra_info("socket") if request.transport else None
    if sock is not None:
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, STREAM_SNDBUF)
        except OSError:  # not a TCP socket (a test's): the write deadline still holds
            pass


def _starting() -> web.Response:
    return web.Response(status=503, text="starting: not serving figures yet")
