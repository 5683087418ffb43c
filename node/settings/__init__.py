"""The settings room: every setting of a peer, written once, and the fronts that read them.

- `options`: the machinery. An `Option` is one setting; its key (`sync-every`) is its public
  name everywhere: the flag `--sync-every`, the file key `sync-every`, the variable
  `SWARMNODE_SYNC_EVERY` and the Python keyword `sync_every=`. An `OptionSet` makes the flags,
  reads a `--config` file and the environment, and prints `--print-config`.
- `start_options`: the table of `swarmnode start` (`START_OPTIONS`, by group) and the
  `PeerConfig` a resolved set of options builds.
- `config`: `PeerConfig` (every setting of one swarm peer, validated) and its address parsers.
- `keywords`: `from_keywords(**kw) -> PeerConfig`, the table read as Python keywords
  (`swarmnode.Peer(model, sync_every=10)`).
- `naming`: how an error below the fronts names a setting (`` `max_lead` ``) and how each
  front shows it (`--max-lead`, `$SWARMNODE_MAX_LEAD`, `max-lead` in a file, `max_lead=`).

It knows no argparse verb, no running peer and no page: node/cli, node/peer and node/web use it.
"""

from swarmnode.node.settings.config import (
    DEFAULT_LISTEN,
    NAME_RE,
    SHARD_AUTO,
    PeerConfig,
    parse_hostport,
    parse_seeds,
)
from swarmnode.node.settings.keywords import from_keywords, keywords, validated
from swarmnode.node.settings.naming import as_flag, as_keyword, name_by_source, name_settings
from swarmnode.node.settings.options import COMMON, Option, OptionSet, Resolved
from swarmnode.node.settings.start_options import (
    LOG_OPTIONS,
    OTHER_VARS,
    START_OPTIONS,
    build_config,
    check_node_table,
    log_options,
    start_options,
)

__all__ = [
    "COMMON",
    "DEFAULT_LISTEN",
    "LOG_OPTIONS",
    "NAME_RE",
    "OTHER_VARS",
    "SHARD_AUTO",
    "START_OPTIONS",
    "Option",
    "OptionSet",
    "PeerConfig",
    "Resolved",
    "as_flag",
    "as_keyword",
    "build_config",
    "check_node_table",
    "from_keywords",
    "keywords",
    "log_options",
    "name_by_source",
    "name_settings",
    "parse_hostport",
    "parse_seeds",
    "start_options",
    "validated",
]
