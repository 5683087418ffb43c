"""The peer's side of its web page (node/web/): what the page reads of it, and its events.

The page room knows no `Node`; this module hands it callables over the node's live objects,
turns membership changes into event lines, and lists the counters and settings whose moves are
events (`Probe`s, read once a second by an owned task: `probe_loop`). What it reads of the peer
is `PageSource`, declared here so that the `Node` that wires the page in is never imported.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

from aiohttp import web
from swarmnode.node.peer.reach import reach_of
from swarmnode.node.peer.status_routes import StatusSource, fault_spec, member_clock, self_status
from swarmnode.node.web import (
    Access,
    EventLog,
    Probe,
    Sources,
    SwarmWatch,
    came_back,
    member_event,
    watch_probes,
)
from swarmnode.node.web import web_routes as _web_routes

if TYPE_CHECKING:
    from swarmnode.gossip.membership import Change


class PageSource(StatusSource, Protocol):
    """What the page reads of a peer (the `Node` implements it): the status's sources, the
    event log it keeps, and the page's fan-out, which `page_routes` builds and the peer closes."""

    events: EventLog
    watch: SwarmWatch | None


def page_routes(node: PageSource) -> list[web.RouteDef]:
    """The page's routes; builds `node.watch` (closed by `Node.close`)."""
    token = node.signer.read_token()  # a closed swarm's: its members ask each other with it
    node.watch = SwarmWatch(
        Sources(
            peer_id=lambda: node.peer_id,
            own=lambda: own_figures(node),
            members=lambda: other_members(node),
            events=node.events,
            token=token,
        )
    )
    return _web_routes(node.watch, lambda: own_figures(node), node.events, Access(token))


def own_figures(node: PageSource) -> dict[str, Any] | None:
    """The `self` of /v1/status; None until the exchange exists (the server binds first)."""
    if getattr(node, "exchanger", None) is None:
        return None
    return self_status(node)


def other_members(node: PageSource) -> list[dict[str, Any]]:
    membership = getattr(node, "membership", None)
    if membership is None:
        return []
    return [
        {
            **m.as_status(),
            "reach": reach_of(m.meta),  # outbound: nobody dials it (reach.py)
            **member_clock(node.signer, m.peer_id, m.addr),  # its clock off mine, if it is
        }
        for m in membership.members()
        if m.peer_id != node.peer_id
    ]


def log_member_changes(node: PageSource) -> None:
    """Every state change of a member in this peer's table becomes an event line; a member
    that comes back (a new life) starts its link figures afresh (`came_back`)."""

    def changed(change: Change) -> None:
        said = member_event(change.old, change.new, change.incarnation)
        if said is not None:
            node.events.add(said[0], said[1], change.peer_id, incarnation=change.incarnation)
        if came_back(change.old, change.new):
            node.links.forget(change.addr)

    node.membership.on_change(changed)


def probes(node: PageSource) -> list[Probe]:
    """What `watch_probes` reads of the peer once a second."""
    members, ex = node.membership, node.exchanger

    def pace() -> str:
        p = node.worker.pacer
        parts = [
            f"x{p.slowdown:g}" if p.slowdown != 1 else "",
            f"{p.step_s:g} s/step" * bool(p.step_s),
        ]
        return " ".join(filter(None, parts)) or "none"

    return [
        Probe("refused", "strangers refused (key not trusted)", lambda: members.admission.refused_untrusted),
        Probe("refused", "newcomers refused (rate limit)", lambda: members.admission.refused_rate),
        Probe("refused", "members refused (per-host cap)", lambda: members.intake.cap.refused),
        Probe("refused", "forged member records dropped", lambda: members.intake.forged_digests),
        Probe("byzantine", "pushed models refused (beyond the clip bound)", lambda: ex.guard.refused),
        Probe("rejected", "received models rejected (malformed)", lambda: ex.rejected),
        Probe("fault", "faults", lambda: fault_spec(node), counter=False),
        Probe("fault", "byzantine behaviour", lambda: node.byzantine.kind, counter=False),
        Probe("fault", "slowdown", pace, counter=False),
        Probe("state", "state", lambda: node.state, counter=False),
    ]  # fmt: skip


async def probe_loop(node: PageSource) -> None:
    await watch_probes(probes(node), node.events)


__all__ = ["EventLog", "log_member_changes", "page_routes", "probe_loop"]
