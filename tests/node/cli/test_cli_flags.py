"""Errors from below the fronts name settings in backquotes; each front names them its way:
the CLI as flags (or where the value was set), the Python API as keywords."""

from __future__ import annotations

import pytest
from swarmnode.gossip.errors import ExchangeError
from swarmnode.gossip.exchange.exchanger import ExchangeConfig
from swarmnode.gossip.membership.failure import timing_problems
from swarmnode.node.settings import Resolved, as_flag, as_keyword, name_by_source, name_settings
from swarmnode.node.settings.naming import options_by_name

pytestmark = pytest.mark.timeout(30)


def test_gossip_errors_name_fields_and_the_cli_names_flags():
    with pytest.raises(ExchangeError) as info:
        ExchangeConfig(timeout=0).validate()
    assert "--" not in str(info.value) and "`timeout`" in str(info.value)
    assert name_settings(str(info.value), as_flag).startswith("--exchange-timeout has an invalid")
    assert name_settings(str(info.value), as_keyword).startswith("exchange_timeout= has an")


def test_every_field_a_gossip_timing_message_names_is_a_real_flag_or_plain_text():
    (problem,) = timing_problems(0.5, 0.6, 2.5, 60.0)
    assert "--" not in problem
    text = name_settings(problem, as_flag)
    assert "--gossip-interval" in text and "`" not in text
    assert "suspect_after" in text  # no such flag: the field stays, unquoted


def test_unknown_fields_lose_their_quotes_and_nothing_else_changes():
    assert name_settings("`nope` and `sync_every`, not `Sync`", as_flag) == (
        "nope and --sync-every, not `Sync`"
    )


def test_a_field_and_a_keyword_name_the_same_option():
    by_name = options_by_name()
    assert by_name["mode"].key == by_name["exchange"].key == "exchange"
    assert by_name["timeout"].key == by_name["exchange_timeout"].key == "exchange-timeout"
    assert by_name["delta_rule"].key == by_name["mix_rule"].key == "mix-rule"
    assert by_name["trust_file"].key == by_name["trust"].key == "trust"


def test_the_cli_names_each_setting_as_where_it_was_set():
    r = Resolved(sources={"max-lead": "$SWARMNODE_MAX_LEAD", "lr": "/etc/peer.toml"})
    r.sources |= {"momentum": "--momentum", "sync-every": "default"}
    text = "`max_lead`, `lr`, `momentum` and `sync_every`"
    assert name_by_source(text, r) == (
        "$SWARMNODE_MAX_LEAD, lr, --momentum and --sync-every (set by /etc/peer.toml)"
    )
