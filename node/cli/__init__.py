"""The command line: one argparse verb per module, progress lines and the status table.

The only room that knows flag names.
"""

from swarmnode.node.cli.command import main

__all__ = ["main"]
