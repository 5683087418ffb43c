"""`--shard auto` (node/peer/shard_pick.py): the lowest shard no live member holds, from a
seed's own view of the swarm."""

from __future__ import annotations

import pytest
from swarmnode.node.peer.shard_pick import choose, held_shards, shard_text
from swarmnode.node.settings import PeerConfig
from swarmnode.node.train.errors import ConfigError

pytestmark = pytest.mark.timeout(30)


def status(self_shard, *members):
    return {
        "self": {"peer_id": "seed", "shard": self_shard},
        "members": [{"peer_id": p, "state": s, "shard": sh} for p, s, sh in members],
    }


def test_the_lowest_shard_no_live_peer_holds():
    st = status("0/4", ("b", "alive", "1/4"), ("c", "dead", "2/4"), ("d", "suspect", "3/4"))
    held = held_shards(st, "me")
    assert sorted(h[1] for h in held) == [(0, 4), (1, 4), (3, 4)]
    assert choose(held, "seed:1") == (2, 4)  # c is dead: its shard is free


def test_a_restarted_peer_is_not_in_its_own_way():
    st = status("0/3", ("me", "alive", "1/3"))
    assert choose(held_shards(st, "me"), "s") == (1, 3)


@pytest.mark.parametrize(
    ("st", "fragment"),
    [
        (status(None, ("b", "alive", None)), "started without --shard"),
        (status("0/2", ("b", "alive", "1/3")), "different shard counts"),
        (status("0/2", ("b", "alive", "1/2")), "all 2 shards are held"),
    ],
)
def test_no_free_shard_is_one_line(st, fragment):
    with pytest.raises(ConfigError, match=fragment):
        choose(held_shards(st, "me"), "seed:1")


def test_auto_needs_a_swarm_to_ask():
    with pytest.raises(ConfigError, match="`shard` auto needs `join`"):
        PeerConfig(shard="auto").validate()
    cfg = PeerConfig(shard="auto", join=["127.0.0.1:7070"]).validate()
    assert cfg.shard_auto and cfg.shard == (0, 1)


def test_only_a_real_shard_is_announced():
    assert shard_text((0, 1)) is None and shard_text((2, 4)) == "2/4"
