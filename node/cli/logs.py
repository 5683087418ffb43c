"""The log on stderr: a timestamp and the peer's name on every line, as text or as JSON.

Text:  `2026-05-01 12:00:00.123 INFO  a gossip.membership.service: ...`
JSON:  `{"time": "2026-05-01T12:00:00.123+00:00", "level": "INFO", "peer": "a", "logger":
"gossip.membership.service", "message": "..."}`, one object a line (`--log-json`), for journald or a
log shipper. The peer is its `--name`, else its id once known (`node/peer/log_name.py`), `-`
before. Logger names drop the `swarmnode.` every one of them starts with.
"""

from __future__ import annotations

import datetime
import json
import logging
import sys
from typing import TextIO

from swarmnode.node.peer import log_name

_PREFIX = "swarmnode."


class _PeerFilter(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        record.peer = log_name()
        record.short = record.name.removeprefix(_PREFIX)
        return True


class _TextFormatter(logging.Formatter):
    def __init__(self) -> None:
        super().__init__(
            "%(asctime)s.%(msecs)03d %(levelname)-7s %(peer)s %(short)s: %(message)s",
            datefmt="%Y-%m-%d %H:%M:%S",
        )


class _JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        when = datetime.datetime.fromtimestamp(record.created, datetime.timezone.utc)
        out = {
            "time": when.isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "peer": getattr(record, "peer", log_name()),
            "logger": getattr(record, "short", record.name),
            "message": record.getMessage(),
        }
        if record.exc_info:
            out["exception"] = self.formatException(record.exc_info)
        return json.dumps(out, default=str)


def setup_logging(level: str = "INFO", as_json: bool = False, stream: TextIO | None = None) -> None:
    """(Re)configure the root logger; called again once a config file has set the level."""
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.addFilter(_PeerFilter())
    handler.setFormatter(_JsonFormatter() if as_json else _TextFormatter())
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(getattr(logging, level.upper()))
