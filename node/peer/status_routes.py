"""What a peer tells the outside: `GET /v1/status` (JSON) and `GET /metrics` (Prometheus text).

Both are computed at request time from the live objects, so nothing here can go stale. The
Prometheus side uses prometheus-client's collector API rather than hand-written text, so the
exposition format (escaping, types, HELP lines) is right by construction.

What an outsider reads (issue 34, item 18). Of an open swarm, everything: anyone may join it and
read the same from inside. Of a closed swarm (`--secret`), without a credential, only that this
peer is up and what it speaks: `GET /v1/status` answers

    {"self": {"state": ..., "version": ..., "envelope": ..., "protocol": ...}, "members": [], "closed": true}

and `/metrics`, like the page's data routes (node/web/routes.py), answers 401. Members'
addresses, shards, injected faults, byzantine kinds, links and figures are for a reader from
this machine (loopback) or one that presents the swarm's read token, a one-way derivative of
the secret (`Authorization: Bearer`, gossip/auth/read_token.py): `swarmnode status --secret`,
the chaos runner and `--shard auto` send it. Admission in `trust` mode without a secret has no
secret to derive a token from: its peers show everything, as an open swarm's.
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, Protocol

from aiohttp import web
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.exposition import CONTENT_TYPE_LATEST
from swarmnode.fault.inject import FaultConfig
from swarmnode.gossip.auth import VERSION as ENVELOPE_VERSION
from swarmnode.gossip.membership import OUTBOUND
from swarmnode.gossip.wire import PROTOCOL_VERSION
from swarmnode.node.peer.reach import reach_of
from swarmnode.node.web import Access, refused

from swarmnode import __version__

if TYPE_CHECKING:
    from swarmnode.fault.inject import FaultyTransport
    from swarmnode.gossip.auth import Signer
    from swarmnode.gossip.exchange import Exchanger
    from swarmnode.gossip.link import MeasuringTransport
    from swarmnode.gossip.membership import Membership
    from swarmnode.node.peer.byzantine_serving import ByzantineServing
    from swarmnode.node.train import TrainingWorker

MEMBER_STATES = ("alive", "suspect", "dead", "left")


class StatusSource(Protocol):
    """What the status routes read of a peer (the `Node` implements it)."""

    peer_id: str
    name: str | None
    addr: str
    shard: str | None
    state: str
    started_at: float
    worker: TrainingWorker
    membership: Membership
    byzantine: ByzantineServing
    faults: FaultyTransport | None  # only with --fault or the admin routes
    links: MeasuringTransport
    signer: Signer

    @property
    def exchanger(self) -> Exchanger | None:
        """None until the peer has built it (the server is bound before it exists)."""
        ...


def fault_spec(node: StatusSource) -> str:
    """The faults this peer injects, as `--fault` text ("none" without a fault layer too)."""
    return (FaultConfig() if node.faults is None else node.faults.config).to_spec()


def status_json(node: StatusSource) -> dict[str, Any]:
    others = [
        {
            **m.as_status(),
            "shard": m.meta.get("shard"),
            "reach": reach_of(m.meta),
            **member_clock(node.signer, m.peer_id, m.addr),
        }
        for m in node.membership.members()
        if m.peer_id != node.peer_id
    ]
    return {"self": self_status(node, others), "members": others}


def member_clock(signer: Signer, peer_id: str, addr: str) -> dict[str, Any]:
    """How far a member's clock is off this peer's, as its envelopes measured it
    (gossip/auth/replay.py): `clock_s` (theirs minus mine) and `clock`, "tolerated" (taken,
    but off by more than the plain 30 s window) or "refused" (beyond what is tolerated: the
    member may be listed alive by its heartbeats, yet nothing of it is exchanged here). Both
    None where the clocks agree or no envelope of its was seen."""
    seen = signer.guard.clock_of(peer_id, addr)
    if seen is None or (not seen.refused and abs(seen.offset) <= signer.guard.max_skew):
        return {"clock": None, "clock_s": None}
    return {"clock": "refused" if seen.refused else "tolerated", "clock_s": round(seen.offset, 1)}


def self_status(node: StatusSource, others: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """This peer's own figures: the `self` of /v1/status (and of /v1/figures, node/web/).
    `others`: the members' rows, if the caller has them (they name the links' partners)."""
    m = node.worker.metrics()
    ex = node.exchanger
    me = {
        "peer_id": node.peer_id,
        "name": node.name,
        "addr": node.addr,
        "version": __version__,
        "envelope": ENVELOPE_VERSION,  # every peer of a swarm must speak the same
        "protocol": PROTOCOL_VERSION,  # ... and this one (control messages)
        "shard": node.shard,  # I/N, or None on the whole set (`--shard auto` reads it)
        "incarnation": node.membership.incarnation,  # goes up when this peer refutes
        "state": node.state,
        # direct, or outbound: nobody can dial this peer, it starts its exchanges (reach.py)
        "reach": reach_of(node.membership.table.meta),
        "device": m.device,
        "step": m.step,
        "loss": _num(m.loss),
        "acc": _num(m.test_acc),
        "test_loss": _num(m.test_loss),
        "samples_per_s": _num(m.samples_per_s),
        # share of the training thread's time spent training, not waiting for a round: below
        # 1 the network, not the compute, sets the pace (--max-lead)
        "utilization": _num(node.worker.utilization()),
        "waited_s": node.worker.waited_s,
        "byzantine": node.byzantine.kind,
        "error": None if node.worker.error is None else str(node.worker.error),
        "faults": fault_spec(node),
        "uptime_s": time.monotonic() - node.started_at,
        "consensus_dist": consensus_distance(ex),
        "exchange": {
            "mode": ex.cfg.mode,
            "rounds": ex.rounds,
            "applied": ex.rounds_applied,
            "served": ex.served,
            "rejected": ex.rejected,
            "pushes_mixed": ex.pushes.mixed,
            "pushes_refused": ex.guard.refused,
            "bytes_sent": ex.bytes_sent,
            "last_round_s": ex.last_round_s,
            "max_round_s": ex.max_round_s,
            "compress": ex.cfg.compress,
            **ex.compression.frame_counts(),
        },
    }
    if others is None:
        members = node.membership.members()
        known = {mem.addr: mem.peer_id for mem in members if mem.peer_id != node.peer_id}
    else:
        known = {m["addr"]: m["peer_id"] for m in others}
    me["links"] = node.links.snapshot(known)  # what this peer measured of each partner's link
    return me


def consensus_distance(ex: Exchanger) -> float | None:
    """How far this peer's model lies from those it mixes with: the median of its distances
    |x_j - own| to the models its own last rounds gathered (the push guard keeps the last 16,
    gossip/robust/push_guard.py). None before its first round."""
    tau = ex.guard.radius()  # factor x that median
    return None if tau is None else _num(tau / ex.guard.factor)


def _num(x: float | None) -> float | None:
    return None if x is None or not math.isfinite(x) else float(x)


class PeerMetricsCollector:
    """A prometheus-client collector that reads the node when scraped."""

    def __init__(self, node: StatusSource) -> None:
        self.node = node

    def collect(self) -> Iterator[Any]:
        s = status_json(self.node)["self"]
        labels = ["peer_id"]
        pid = [s["peer_id"]]
        for name, key, doc in (
            ("swarmnode_step", "step", "optimizer steps taken"),
            ("swarmnode_train_loss", "loss", "mean train loss since the last evaluation"),
            ("swarmnode_test_accuracy", "acc", "test accuracy at the last evaluation"),
            ("swarmnode_test_loss", "test_loss", "test loss at the last evaluation"),
            ("swarmnode_samples_per_second", "samples_per_s", "training throughput"),
            (
                "swarmnode_consensus_distance",
                "consensus_dist",
                "median L2 distance to the models of this peer's last exchange rounds",
            ),
            (
                "swarmnode_compute_utilization",
                "utilization",
                "share of the training thread's time spent training, not waiting for an "
                "exchange round (below 1: the network sets the pace)",
            ),
        ):
            g = GaugeMetricFamily(name, doc, labels=labels)
            g.add_metric(pid, math.nan if s[key] is None else s[key])
            yield g
        waited = CounterMetricFamily(
            "swarmnode_exchange_wait_seconds",
            "time the training thread waited for an exchange round (--max-lead)",
            labels=labels,
        )
        waited.add_metric(pid, s["waited_s"])
        yield waited
        ex = s["exchange"]
        for name, key, doc in (
            ("swarmnode_exchange_rounds", "rounds", "exchange rounds started"),
            ("swarmnode_exchange_applied", "applied", "exchange rounds that changed the model"),
            ("swarmnode_exchange_served", "served", "exchange requests served to other peers"),
            ("swarmnode_exchange_rejected", "rejected", "received models rejected as malformed"),
            ("swarmnode_pushes_mixed", "pushes_mixed", "models pushed to this peer and mixed in"),
            (
                "swarmnode_pushes_refused",
                "pushes_refused",
                "models pushed to this peer refused by the push bound (beyond its clip radius)",
            ),
        ):
            c = CounterMetricFamily(name, doc, labels=labels)
            c.add_metric(pid, ex[key])
            yield c
        outbound = GaugeMetricFamily(
            "swarmnode_outbound_only",
            "1 if nobody can dial this peer (it starts every exchange itself), else 0",
            labels=labels,
        )
        outbound.add_metric(pid, float(s["reach"] == OUTBOUND))
        yield outbound
        members = GaugeMetricFamily(
            "swarmnode_members", "known members by state", labels=["peer_id", "state"]
        )
        counts = dict.fromkeys(MEMBER_STATES, 0)
        for mem in self.node.membership.members():
            counts[str(mem.state)] = counts.get(str(mem.state), 0) + 1
        for state, n in counts.items():
            members.add_metric([s["peer_id"], state], n)
        yield members
        yield from _link_metrics(s)


def _link_metrics(s: dict[str, Any]) -> Iterator[Any]:
    """Per partner link: latency, throughput, bytes each way, requests in flight."""
    labels = ["peer_id", "partner"]
    gauges = (
        ("swarmnode_link_rtt_seconds", "rtt_ms", 1e-3, "EWMA latency of small requests"),
        ("swarmnode_link_throughput_bits_per_second", "mbit_s", 1e6, "EWMA bulk throughput"),
        ("swarmnode_link_inflight_requests", "inflight", 1, "requests to the partner in flight"),
    )
    counters = (
        ("swarmnode_link_sent_bytes", "bytes_sent", "request bytes sent to the partner"),
        ("swarmnode_link_received_bytes", "bytes_received", "answer bytes received from it"),
        ("swarmnode_link_failures", "failures", "requests to the partner that failed"),
    )
    for name, key, scale, doc in gauges:
        g = GaugeMetricFamily(name, doc, labels=labels)
        for link in s["links"]:
            value = link[key]
            g.add_metric([s["peer_id"], link["addr"]], math.nan if value is None else value * scale)
        yield g
    for name, key, doc in counters:
        c = CounterMetricFamily(name, doc, labels=labels)
        for link in s["links"]:
            c.add_metric([s["peer_id"], link["addr"]], link[key])
        yield c


def _ready(node: StatusSource) -> bool:
    """The server is bound before membership and exchange exist (the address comes first)."""
    return getattr(node, "exchanger", None) is not None


def _starting() -> web.Response:
    return web.Response(status=503, text="starting: not serving status yet")


def outside_status(node: StatusSource) -> dict[str, Any]:
    """What a closed swarm's peer tells a reader without its read token: up, and its version."""
    me = {"state": node.state, "version": __version__, "envelope": ENVELOPE_VERSION}
    me["protocol"] = PROTOCOL_VERSION
    return {"self": me, "members": [], "closed": True}


def status_routes(node: StatusSource, access: Access | None = None) -> list[web.RouteDef]:
    """The two routes; `access` (default: from the node's swarm secret) says who reads all."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(PeerMetricsCollector(node))
    access = access or Access(node.signer.read_token())

    async def status(request: web.Request) -> web.Response:
        if not access.may_read(request):
            return web.json_response(outside_status(node))
        if not _ready(node):
            return _starting()
        return web.json_response(status_json(node))

    async def metrics(request: web.Request) -> web.Response:
        if not access.may_read(request):
            return refused()
        if not _ready(node):
            return _starting()
        body = generate_latest(registry)
        return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE_LATEST})

    return [web.get("/v1/status", status), web.get("/metrics", metrics)]
