"""The command line: argparse and the verbs (one module per verb), progress lines and the
status table. What the verbs read (the option table, the config file, the environment) is the
settings room's, `swarmnode.node.settings`.
"""

from swarmnode.node.cli.command import main

__all__ = ["main"]
