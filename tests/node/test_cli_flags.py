"""Errors from below the CLI name config fields; the CLI prints the flags that set them."""

from __future__ import annotations

import pytest
from swarmnode.gossip.errors import ExchangeError
from swarmnode.gossip.exchange.exchanger import ExchangeConfig
from swarmnode.gossip.membership.failure import timing_problems
from swarmnode.node.cli.command import build_parser
from swarmnode.node.cli.flags import field_flags, name_flags

pytestmark = pytest.mark.timeout(30)
FLAGS = field_flags(build_parser())


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


def test_start_defaults_are_the_config_dataclasses_defaults(monkeypatch):
    from dataclasses import fields

    from swarmnode.node.cli.cmd_start import config_from_args
    from swarmnode.node.cli.peer_options import peer_config_from_args
    from swarmnode.node.peer.config import PeerConfig

    monkeypatch.delenv("SWARMNODE_SECRET", raising=False)
    args = build_parser().parse_args(["start"])
    got = peer_config_from_args(args, config_from_args(args))
    want = PeerConfig()
    for f in fields(PeerConfig):
        assert getattr(got, f.name) == getattr(want, f.name), f.name


def test_request_body_limits_are_flags_for_slow_links(monkeypatch):
    """A peer behind a slow link must be able to lower the slow-body defence's rate (issue 11:
    three 21 MB raw pushes sharing a 20 Mbit/s uplink arrive at ~0.8 MB/s each)."""
    from swarmnode.node.cli.cmd_start import config_from_args
    from swarmnode.node.cli.peer_options import peer_config_from_args
    from swarmnode.node.peer.limits import intake_limits

    monkeypatch.delenv("SWARMNODE_SECRET", raising=False)
    argv = ["start", "--body-min-rate", "100000", "--body-grace-s", "30", "--max-body-mb", "64"]
    args = build_parser().parse_args(argv)
    cfg = peer_config_from_args(args, config_from_args(args))
    assert (cfg.body_min_rate, cfg.body_grace_s, cfg.max_body_mb) == (100_000, 30, 64)
    limits = intake_limits(cfg, n_params=1000)
    assert limits.deadline(21_000_000, 1 << 30) == pytest.approx(30 + 210)


def test_backward_limit_flag_reaches_the_exchange_config(monkeypatch):
    from swarmnode.node.cli.cmd_start import config_from_args
    from swarmnode.node.cli.peer_options import peer_config_from_args

    monkeypatch.delenv("SWARMNODE_SECRET", raising=False)
    args = build_parser().parse_args(["start", "--exchange", "robust", "--backward-limit", "0"])
    assert peer_config_from_args(args, config_from_args(args)).exchange.backward_limit == 0.0
