"""Errors from below the CLI name config fields; the CLI prints the flags that set them."""

from __future__ import annotations

import pytest
from swarmnode.gossip.errors import ExchangeError
from swarmnode.gossip.exchange.exchanger import ExchangeConfig
from swarmnode.gossip.membership.failure import timing_problems
from swarmnode.node.cli.flags import field_flags, name_flags

pytestmark = pytest.mark.timeout(30)
FLAGS = field_flags()


def test_gossip_errors_name_fields_and_the_cli_names_flags():
    with pytest.raises(ExchangeError) as info:
        ExchangeConfig(timeout=0).validate()
    assert "--" not in str(info.value) and "`timeout`" in str(info.value)
    assert name_flags(str(info.value), FLAGS).startswith("--exchange-timeout has an invalid")


def test_every_field_a_gossip_timing_message_names_is_a_real_flag_or_plain_text():
    (problem,) = timing_problems(0.5, 0.6, 2.5, 60.0)
    assert "--" not in problem
    text = name_flags(problem, FLAGS)
    assert "--gossip-interval" in text and "`" not in text
    assert "suspect_after" in text  # no such flag: the field stays, unquoted


def test_unknown_fields_lose_their_quotes_and_nothing_else_changes():
    assert name_flags("`nope` and `sync_every`, not `Sync`", FLAGS) == (
        "nope and --sync-every, not `Sync`"
    )


def test_a_field_of_the_exchange_config_names_its_own_flag():
    assert FLAGS["mode"] == "--exchange" and FLAGS["timeout"] == "--exchange-timeout"
    assert FLAGS["delta_rule"] == "--mix-rule" and FLAGS["trust_file"] == "--trust"
