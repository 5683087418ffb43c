"""How bytes reach a peer. Imports only `swarmnode.gossip.errors` of gossip.

- `transport.py`: the `Transport` interface every protocol talks through, request bodies in
  parts (`Parts`, `Trailed`, `Gated`), and what a handler is handed (`Arrival`: body, remote and local address, time, signer).
- `inmemory.py`: `InMemoryNetwork`, the in-process twin of the HTTP transport (tests, simulators).
- `stats.py`: per-partner latency and throughput (`MeasuringTransport`), `prefer_fast` sampling.
- `backoff.py`: partners that do not answer are sampled rarely (`Backoff`).
- `partners.py`: which partners a round talks to, proven ones first (`PartnerChoice`).
"""

from swarmnode.gossip.link.backoff import BULK, CONTROL, Backoff
from swarmnode.gossip.link.inmemory import InMemoryNetwork, InMemoryTransport
from swarmnode.gossip.link.partners import PartnerChoice
from swarmnode.gossip.link.stats import LinkStat, MeasuringTransport, prefer_fast
from swarmnode.gossip.link.transport import (
    BODY_TAP,
    Arrival,
    Early,
    Gated,
    Handler,
    Parts,
    Tap,
    Trailed,
    Transport,
    body_views,
    completed,
    is_takes_arriving,
    takes_arriving,
)

__all__ = [
    "BODY_TAP",
    "BULK",
    "CONTROL",
    "Arrival",
    "Backoff",
    "Early",
    "Gated",
    "Handler",
    "InMemoryNetwork",
    "InMemoryTransport",
    "LinkStat",
    "MeasuringTransport",
    "PartnerChoice",
    "Parts",
    "Tap",
    "Trailed",
    "Transport",
    "body_views",
    "completed",
    "is_takes_arriving",
    "prefer_fast",
    "takes_arriving",
]
