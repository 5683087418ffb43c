"""Network partitions: which peer can reach which.

A partition is a tuple of disjoint groups of addresses. Every address not named in any group
belongs to one implicit "rest" group, so `a:1+a:2` alone cuts those two peers off from everyone
else, and `a:1|a:2` cuts them from each other *and* from the rest. A request is blocked when its
source and destination fall in different groups. Addresses are compared as plain strings: a peer
must be named exactly as the others address it (`127.0.0.1:7001` is not `localhost:7001`).

Parsing and validation live in `swarmnode.fault.inject.spec`; this module is the pure reachability rule.
"""

from __future__ import annotations

Partition = tuple[frozenset[str], ...]

REST_GROUP = -1  # the implicit group of every address not listed


def group_of(partition: Partition, addr: str) -> int:
    """Index of the group holding `addr`, or `REST_GROUP`."""
    for index, group in enumerate(partition):
        if addr in group:
            return index
    return REST_GROUP


def is_blocked(partition: Partition, src: str, dst: str) -> bool:
    """True when a request from `src` to `dst` crosses a partition boundary."""
    if not partition:
        return False
    return group_of(partition, src) != group_of(partition, dst)


def format_partition(partition: Partition) -> str:
    """The spec text for `partition` (members sorted, so equal partitions print the same)."""
    return "|".join("+".join(sorted(group)) for group in partition)
