"""The peer name that every log line of this process carries (the CLI's log format reads it).

One peer per process is what `swarmnode start` runs; tests that host several in one process see
the last one's name, which only their log lines show.
"""

from __future__ import annotations

_name = "-"


def set_log_name(name: str) -> None:
    """Called once the peer knows who it is: its `--name`, else its peer id."""
    global _name
    _name = name


def log_name() -> str:
    return _name
