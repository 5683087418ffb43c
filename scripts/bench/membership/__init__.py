"""Membership: who is alive, how soon every peer knows, and what it costs.

- liveness: bootstrap, join, false deaths and crash detection, simulated on a virtual clock
  (`--mode sim`) or on real processes (`--mode real`: liveness_real.py);
- signed_gossip: what signatures cost on the gossip path, steady state;
- hostile: membership under attack (a real peer flooded), and the gossip path signed;
- clock_skew: a member whose clock jumps after it joined: rounds applied before and after.
"""
