"""One name per setting, from Python: `swarmnode.Peer(model, sync_every=10)` takes every option
of `swarmnode start` by its key with `_` (node/settings/keywords.py), parsed by the option
itself; the old spellings still work; errors name the keyword. No peer is started here."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from swarmnode.gossip.exchange import ExchangeConfig
from swarmnode.node.settings import START_OPTIONS, from_keywords, keywords, validated
from swarmnode.node.train.data.shard import Partition
from swarmnode.node.train.errors import ConfigError

import swarmnode

pytestmark = pytest.mark.timeout(30)


def test_peer_takes_the_option_keys_as_keywords():
    peer = swarmnode.Peer("mlp:16", sync_every=10, exchange_timeout=3.0)
    assert peer.config.exchange.sync_every == 10 and peer.config.exchange.timeout == 3.0
    assert peer.node is None  # built, not started


def test_every_documented_option_has_a_keyword_and_its_default_round_trips():
    table = keywords()
    assert len(table) == sum(not o.hidden for o in START_OPTIONS) >= 58
    assert {
        "sync_every",
        "exchange_timeout",
        "trust",
        "mix_rule",
        "push_budget",
        "compress",
    } <= set(table)
    # the keyword of each option, given the text of its default, gives the default config
    cfg = from_keywords(**{k: o.text_of(_default(o)) for k, o in table.items() if _given(o)})
    assert cfg == from_keywords()


def _default(opt):
    value = from_keywords()
    for part in opt.path.split("."):
        value = getattr(value, part)
    return value


def _given(opt) -> bool:
    return _default(opt) is not None and opt.key not in ("model", "data", "join")


@pytest.mark.parametrize(
    ("kw", "path", "want"),
    [
        # the text a flag takes
        ({"push_budget": "off"}, "exchange.push_budget", False),
        ({"mix_rule": "replace"}, "exchange.delta_rule", False),
        ({"shard": "2/4"}, "shard", (2, 4)),
        ({"join": "10.0.0.5:7070,10.0.0.6:7070"}, "join", ["10.0.0.5:7070", "10.0.0.6:7070"]),
        ({"lr": "0.01"}, "lr", 0.01),
        ({"exchange": "robust"}, "exchange.mode", "robust"),  # the key `exchange`: the mode
        ({"partition": "dirichlet:0.5"}, "partition", Partition("dirichlet", 0.5)),
        # the natural Python value
        ({"sync_every": 7}, "exchange.sync_every", 7),
        ({"exchange_timeout": 2}, "exchange.timeout", 2.0),  # an int where a number is asked
        ({"enable_admin": True}, "enable_admin", True),
        ({"join": ["10.0.0.5:7070"]}, "join", ["10.0.0.5:7070"]),
        ({"shard": (1, 3)}, "shard", (1, 3)),
        ({"checkpoint_dir": Path("/tmp/ck")}, "checkpoint_dir", Path("/tmp/ck")),
        ({"trust": Path("/etc/keys")}, "trust_file", "/etc/keys"),
        ({"checkpoint_dir": None}, "checkpoint_dir", None),
        # the old spellings: a PeerConfig field by its own name, an ExchangeConfig or its dict
        ({"trust_file": "/etc/keys"}, "trust_file", "/etc/keys"),
        ({"exchange": {"sync_every": 5}}, "exchange.sync_every", 5),
        ({"exchange": ExchangeConfig(group=2)}, "exchange.group", 2),
        ({"exchange": {"compress": "int8"}, "sync_every": 4}, "exchange.sync_every", 4),
    ],
)
def test_each_kind_of_value_and_spelling(kw, path, want):
    value = from_keywords(**kw)
    for part in path.split("."):
        value = getattr(value, part)
    assert value == want


def test_shard_auto_from_python_is_the_cli_auto():
    cfg = from_keywords(shard="auto")
    assert cfg.shard_auto and cfg.shard == (0, 1)


def test_an_object_model_and_data_pass_as_they_are():
    def build():
        raise AssertionError("not called: the config only holds it")

    arrays = ([[0.0]], [0], [[0.0]], [0])
    cfg = swarmnode.Peer(build, arrays).config
    assert cfg.model is build and cfg.data is arrays


@pytest.mark.parametrize(
    ("kw", "message"),
    [
        ({"sync_evry": 3}, "unknown peer setting 'sync_evry'; did you mean 'sync_every'?"),
        ({"exchange_timout": 3}, "did you mean 'exchange_timeout'?"),
        ({"push_budget": False}, "push_budget=: expected one of on, off, got False"),
        ({"push_budget": "maybe"}, "push_budget=: 'maybe' is not one of on, off"),
        ({"lr": "abc"}, "lr=: expected a number, got 'abc'"),
        ({"steps": 1.5}, "steps=: expected an integer, got 1.5"),
        ({"steps": True}, "steps=: expected an integer, got True"),
        ({"enable_admin": 1}, "enable_admin=: expected true or false, got 1"),
        ({"shard": (5, 2)}, "shard=: bad shard '5/2'"),
        ({"shard": [0.5, 2]}, "shard=: expected 'INDEX/COUNT', 'auto' or a pair"),
        ({"join": "nowhere"}, "join=: seed 'nowhere': expected HOST:PORT"),
        ({"join": [1, 2]}, "join=: expected a list or a string, got [1, 2]"),
        ({"sync_every": None}, "sync_every=: expected an integer, got None"),
        ({"lr": [0.1]}, "lr=: expected a number, got [0.1]"),
        ({"trust": "a", "trust_file": "b"}, "trust= and trust_file= set the same setting"),
        (
            {"exchange": {"sync_every": 3}, "sync_every": 4},
            "sync_every= and exchange={'sync_every'",
        ),
        ({"exchange": {"sync_evry": 5}}, "exchange settings: unknown field(s) 'sync_evry'"),
        ({"exchange": 3}, "exchange=: expected average or robust (the mode), got a int"),
    ],
)
def test_a_bad_keyword_or_value_names_the_keyword(kw, message):
    with pytest.raises(ConfigError) as info:
        swarmnode.Peer("mlp:16", **kw)
    assert message in str(info.value)


@pytest.mark.parametrize(
    ("kw", "message"),
    [
        ({"max_lead": 0.5}, "max_lead= has an invalid value: 0.5"),
        ({"sync_every": 0}, "sync_every= has an invalid value: 0"),  # a gossip/ field
        ({"exchange_timeout": 0}, "exchange_timeout= has an invalid value: 0.0"),  # `timeout`
        ({"momentum": 1.5}, "momentum= must be in [0, 1), got 1.5"),  # node/train's NodeConfig
        ({"admission": "secret"}, "admission= secret needs secret="),
        ({"enable_admin": True}, "enable_admin= needs admin_key="),
    ],
)
def test_a_value_out_of_range_names_the_keyword_when_the_peer_starts(kw, message):
    peer = swarmnode.Peer("mlp:16", **kw)
    with pytest.raises(ConfigError) as info:
        asyncio.run(peer.start())
    assert str(info.value) == message or str(info.value).startswith(message)
    assert "--" not in str(info.value) and "`" not in str(info.value)
    assert peer.node is None  # refused before anything was built


def test_validated_names_settings_as_the_caller_asks():
    with pytest.raises(ConfigError, match=r"^--max-lead has an invalid"):
        validated(from_keywords(max_lead=0.5), lambda opt: opt.flag)
