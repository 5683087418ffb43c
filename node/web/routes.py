"""The page's routes, all `GET`, none of which changes anything:

- `/`: the page (static/index.html); `/web/{file}`: its script, style and the vendored chart
  library, from a fixed list (no path is ever built from the request);
- `/v1/watch`: the live stream (Server-Sent Events): a `hello` (snapshot, chart history, recent
  events), then a frame a second while the viewer stays; `MAX_VIEWERS` at once, 503 beyond;
- `/v1/watch/now`: the current snapshot as JSON (`swarmnode status --watch` polls it);
- `/v1/figures`: this peer's own figures and its recent local events, what the other peers'
  watches fetch (public, like `/v1/status`).

Every answer carries a Content-Security-Policy that allows only this origin's own script and
style: the page shows names and texts other peers wrote, and draws them as text, never markup.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from importlib import resources
from typing import Any

from aiohttp import web
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
    watch: SwarmWatch, figures: Callable[[], dict[str, Any] | None], events: EventLog
) -> list[web.RouteDef]:
    """The page's routes over `watch`; `figures()` is this peer's own `self` of /v1/status
    (None while it starts), `events` its event log."""
    files = {name: (static_file(path), kind) for name, (path, kind) in STATIC.items()}
    page = static_file(PAGE[0])

    async def index(_request: web.Request) -> web.Response:
        return _file(page, PAGE[1], cache="no-cache")

    async def asset(request: web.Request) -> web.Response:
        found = files.get(request.match_info["name"])
        if found is None:
            raise web.HTTPNotFound(text="no such file")
        return _file(found[0], found[1], cache="max-age=300")

    async def own_figures(_request: web.Request) -> web.Response:
        me = figures()
        if me is None:
            return _starting()
        local = [e.to_json() for e in events.recent(MAX_EVENTS, local_only=True)]
        return web.json_response({"t": time.time(), "self": me, "events": local})

    async def now(_request: web.Request) -> web.Response:
        snap = await watch.now()
        if snap is None:
            return _starting()
        recent = watch.recent_events()
        return web.json_response({**snap, "events": recent}, headers=SECURITY_HEADERS)

    async def stream(request: web.Request) -> web.StreamResponse:
        headers = {"Content-Type": "text/event-stream", "Cache-Control": "no-cache"}
        resp = web.StreamResponse(headers={**headers, **SECURITY_HEADERS})
        try:
            async with watch.viewer() as frames:
                await resp.prepare(request)
                async for frame in frames:
                    await resp.write(frame)
        except Busy as exc:
            return web.Response(status=503, text=str(exc), headers=SECURITY_HEADERS)
        except ConnectionError:  # the viewer left
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


def _starting() -> web.Response:
    return web.Response(status=503, text="starting: not serving figures yet")
