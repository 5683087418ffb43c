"""A front that loads each name it serves on first use (a module `__getattr__`, PEP 562).

A front that imported everything it names would load the code behind every name to serve one:
`import swarmnode` would pull in aiohttp, the trainer and the exchange, and so would the CLI's
log format, which reads one name of the peer's front on every verb (`swarmnode --help` too).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any


def lazy_exports(
    package: str, exports: Mapping[str, str], namespace: dict[str, Any]
) -> Callable[[str], Any]:
    """The `__getattr__` of `package`'s front: `exports` maps each name it serves to the module
    that defines it; `namespace` is the front's `globals()`, where a name loaded once is bound,
    so that later lookups no longer reach this function."""

    def __getattr__(name: str) -> Any:
        module = exports.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
        namespace[name] = value
        return value

    return __getattr__
