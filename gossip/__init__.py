"""The swarm's protocols, in rooms; knows nothing of the model or the CLI.

- `link/`: how bytes reach a peer: the `Transport` interface, its in-memory twin, link
  statistics, back-off from partners that do not answer.
- `wire/`: what the bytes are: parameter frames, lossy codec layouts, control messages,
  reusable buffers, the finite check.
- `auth/`: who sent them: envelopes (secret HMAC, member Ed25519), peer and operator keys,
  replay window, digests computed while a body moves.
- `membership/`: who is in the swarm: the member table and its merge rules, signed records,
  intake and admission, failure detection, join and leave, sampling.
- `exchange/`: how models are mixed: the exchanger's average and robust rounds, the delta rule,
  compressed exchange with per-pair references, who may push or pull.
- `robust/`: what may be mixed: aggregation rules (Krum, median, clipping, ...) and their fast
  paths, the push guard, the heading bound.
- `errors.py`: the gossip error family, each with the HTTP status a route answers it with.

Rooms import downward only (tests/test_import_rules.py): `wire` and `robust` import no other room,
`link` only `errors`, and `exchange` and `membership` never import each other. This front imports
nothing, so that importing one room does not load the others.
"""
