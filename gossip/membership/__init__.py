"""Who is in the swarm. Never imports `swarmnode.gossip.exchange`.

- `service.py`: `Membership`, the gossip loop: push-pull digests to `fanout` sampled peers,
  heartbeats, join through any seed (with backoff) and a signed leave.
- `table.py`: `MemberTable`, one entry per known peer, and the merge rules a received entry
  meets; `views.py`: its read-only rows (`Member`), change notices and timing settings.
- `records.py`: signed self-records and the heartbeat hash chain (`RecordSigner`,
  `RecordOpener`, `Verifier`); `entries.py`: entries on the wire, strictly parsed.
- `intake.py`: what a received digest goes through, cheapest check first; `admission.py`:
  who may become a member (`open`, `secret`, `trust`) and how fast (`TokenBucket`, a rate
  limit any part may use); `caps.py`: members per host.
- `failure.py`: failure-detector timing as pure functions (each member's measured heartbeat
  gaps stretch its thresholds, up to a cap); `sampling.py`: uniform peer choice among the
  dialable (not outbound-only) members.
- `config.py`: `MembershipConfig`, validated.
"""

from swarmnode.gossip.membership.admission import Admission, TokenBucket
from swarmnode.gossip.membership.caps import DEFAULT_PER_HOST
from swarmnode.gossip.membership.config import MembershipConfig
from swarmnode.gossip.membership.entries import Gossiped
from swarmnode.gossip.membership.failure import ALIVE, DEAD, LEFT, SUSPECT
from swarmnode.gossip.membership.records import (
    CHAIN_LENGTH,
    PROGRESS_RESEAL_S,
    RecordSigner,
    seal,
    to_wire,
)
from swarmnode.gossip.membership.sampling import OUTBOUND, REACH, dialable, outbound_only
from swarmnode.gossip.membership.service import Membership, label_of
from swarmnode.gossip.membership.table import DEFAULT_MAX_MEMBERS, MemberTable
from swarmnode.gossip.membership.views import Change, Member, Timing

__all__ = [
    "ALIVE",
    "CHAIN_LENGTH",
    "DEAD",
    "DEFAULT_MAX_MEMBERS",
    "DEFAULT_PER_HOST",
    "LEFT",
    "OUTBOUND",
    "PROGRESS_RESEAL_S",
    "REACH",
    "SUSPECT",
    "Admission",
    "Change",
    "Gossiped",
    "Member",
    "MemberTable",
    "Membership",
    "MembershipConfig",
    "RecordSigner",
    "Timing",
    "TokenBucket",
    "dialable",
    "label_of",
    "outbound_only",
    "seal",
    "to_wire",
]
