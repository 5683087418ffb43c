"""How models are mixed between peers. Never imports `swarmnode.gossip.membership`: it sees the
swarm through the `PeerDirectory` its owner hands it.

- `exchanger.py`: `Exchanger`, a peer's rounds and the routes it serves (`params`,
  `pushpull`); it holds one `Round`, picked by `mode`, and never asks which.
- `average_round.py`, `robust_round.py`: the two modes, each whole (`Round`): my own round
  (group push-pull and its mean; pull k, aggregate, land) and how a model pushed to me is
  judged and mixed (`take_push`); `pushes.py`: what both share there (the sender's budget, the
  bounded mix against a snapshot); `outbound.py`: outbound-only partners, drawn without being
  dialled, answer by their next push.
- `types.py`: what the exchange needs from its peer (`ParamStore`, `PeerDirectory`), what a
  mode is (`Round`) and asks of its exchanger (`RoundIO`), what a round reports
  (`RoundResult`), and `Moved`, what pushes moved me during my round; `config.py`:
  `ExchangeConfig`, validated.
- `delta_rule.py`: a round's result keeps the steps trained while it was in flight.
- `compressed.py`, `refs.py`: compressed push-pull with a shared reference per pair and error
  feedback.
- `access.py`: who may pull or push (a live member, in its own name); `slots.py`: bounds on
  inbound bulk work; `round_log.py`: one log line per round.
- `memory_store.py`: `InMemoryStore`, the in-process twin of `ParamStore` (tests, simulations).
"""

from swarmnode.gossip.exchange.config import ExchangeConfig
from swarmnode.gossip.exchange.exchanger import Exchanger
from swarmnode.gossip.exchange.memory_store import InMemoryStore
from swarmnode.gossip.exchange.types import Moved, ParamStore, PeerDirectory, Round, RoundResult

__all__ = [
    "ExchangeConfig",
    "Exchanger",
    "InMemoryStore",
    "Moved",
    "ParamStore",
    "PeerDirectory",
    "Round",
    "RoundResult",
]
