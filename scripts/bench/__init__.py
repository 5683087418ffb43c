"""Benchmarks, a room by what they measure (scripts/README.md lists every script):

- exchange: bytes between peers: the exchange against raw sockets, its wire frames, the codecs,
  signing on the push-pull's path, the passes over a model's bytes;
- membership: who is alive, how soon that is known, and at what cost: liveness (sim and real
  processes), signed gossip, hostile members, a member whose clock jumps;
- robust: the swarm against bad or slow peers: the robust aggregation rules, the bounds on a
  hostile insider, a slow partner;
- learning: does a swarm learn as well as one peer, and sooner: convergence, the portfolio
  (real and simulated), the user's own loop, the codecs on the network lab;
- compute: one peer's own speed: training throughput, the kernels and models against torch,
  and what Swarm.step() and the swarm page take from training.

Each room's modules are run as files (`python scripts/bench/ROOM/X.py --help`); they import
each other by full name (`scripts.bench.ROOM.X`) after putting the repository root on sys.path.
"""
