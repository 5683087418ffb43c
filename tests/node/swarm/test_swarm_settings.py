"""`Swarm(**settings)`: the same keys as `Peer`, one name per setting, whichever dataclass
holds it (node/swarm/settings.py); the built-in loop's own settings refused with the reason."""

from __future__ import annotations

import pytest
from swarmnode.gossip.exchange import ExchangeConfig
from swarmnode.node.swarm.settings import check_own_loop, config_from, own_loop
from swarmnode.node.train.errors import ConfigError

pytestmark = pytest.mark.timeout(30)


def test_the_settings_map_to_the_peer_and_its_exchange_by_their_one_name():
    cfg = config_from(
        sync_every=7, max_lead=3.0, outer_lr=0.9, outer_momentum=0.2, listen="127.0.0.1:0",
        secret="s3", checkpoint_dir="/tmp/x", name="alice", join="127.0.0.1:7070",
    )  # fmt: skip
    assert cfg.exchange.sync_every == 7
    assert (cfg.exchange.outer_lr, cfg.exchange.outer_momentum) == (0.9, 0.2)
    assert cfg.max_lead == 3.0 and cfg.secret == "s3" and cfg.name == "alice"
    assert str(cfg.checkpoint_dir) == "/tmp/x"
    assert cfg.validate().join == ["127.0.0.1:7070"]


def test_a_library_listens_on_a_free_loopback_port_unless_told():
    assert config_from().listen == "127.0.0.1:0"


def test_an_exchange_given_whole_and_single_keys_merge():
    cfg = config_from(exchange={"compress": "int8"}, sync_every=4)
    assert (cfg.exchange.compress, cfg.exchange.sync_every) == ("int8", 4)
    assert config_from(exchange=ExchangeConfig(group=2)).exchange.group == 2


def test_an_unknown_setting_is_named():
    with pytest.raises(
        ConfigError, match=r"unknown peer setting .sync_evry.*did you mean .sync_every"
    ):
        config_from(sync_evry=10)


@pytest.mark.parametrize("key", ["lr", "optimizer", "steps", "data", "device"])
def test_the_built_in_loops_own_settings_are_refused_with_the_reason(key):
    with pytest.raises(ConfigError, match=rf"{key}=.*own training loop"):
        check_own_loop({key: 1})


def test_the_own_loop_config_names_the_model_and_has_no_step_budget():
    cfg = own_loop(config_from(), "torch Net", 1234)
    assert cfg.model == "own-loop:torch Net:1234" and cfg.steps == 0
