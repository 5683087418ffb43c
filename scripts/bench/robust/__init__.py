"""The swarm against bad or slow peers, and what its defences cost with none.

- aggregate: Krum and the other aggregation rules at realistic sizes, against scipy's cdist;
- push_budget: the bounds on a hostile insider, on and off, two swarms side by side;
- slow_partner: what one slow partner costs the honest peers (at most its grace).
"""
