"""The web room: the live page every peer serves at `/`, read-only.

- `routes`: `GET /` (the page), `/web/{file}` (its script, style and the vendored uPlot),
  `/v1/watch` (Server-Sent Events), `/v1/watch/now` (one snapshot, JSON), `/v1/figures` (this
  peer's own figures, what the others' pages fetch);
- `watch`: `SwarmWatch`, the fan-out to the other members for fresh figures (bounded, cached for
  a second, run only while someone looks), the chart history, the swarm figures, the event feed;
- `events`: `EventLog` and the probes that turn counters and settings into event lines;
- `figures`: the checks on what another peer's figures may carry;
- `static/`: index.html, app.js, style.css, and vendor/ (uPlot, MIT, with its licence).

It knows no `Node`: the peer hands it callables (node/peer/page.py). No build step, no CDN: the
static files ship in the wheel (pyproject `package-data`).

The public front: the names other rooms use.
"""

from swarmnode.node.web.access import Access, refused
from swarmnode.node.web.events import EventLog, Probe, came_back, member_event, watch_probes
from swarmnode.node.web.routes import web_routes
from swarmnode.node.web.watch import Sources, SwarmWatch

__all__ = [
    "Access",
    "EventLog",
    "Probe",
    "Sources",
    "SwarmWatch",
    "came_back",
    "member_event",
    "refused",
    "watch_probes",
    "web_routes",
]
