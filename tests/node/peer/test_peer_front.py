"""node/peer's front is lazy (`swarmnode.lazy.lazy_exports`, which swarmnode's own front uses
too): the CLI's log format reads `log_name` without loading the peer, each other name loads its
module on first use and is bound in the front once, and a name the front does not serve is an
AttributeError that names the front."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import pytest

from swarmnode.lazy import lazy_exports

pytestmark = pytest.mark.timeout(60)


def test_a_lazy_name_is_loaded_from_its_module_and_bound_once() -> None:
    namespace: dict[str, Any] = {}
    getattr_ = lazy_exports("pkg", {"JoinError": "swarmnode.node.peer.errors"}, namespace)
    error = getattr_("JoinError")
    assert error.__module__ == "swarmnode.node.peer.errors" and error.__name__ == "JoinError"
    assert namespace == {"JoinError": error}  # later lookups find it without the function


def test_a_name_the_front_does_not_serve_is_an_attribute_error_naming_the_front() -> None:
    getattr_ = lazy_exports("pkg.front", {}, {})
    with pytest.raises(AttributeError, match=r"module 'pkg.front' has no attribute 'nope'"):
        getattr_("nope")


PROBE = """
import sys
import swarmnode.node.peer as front
print("light", "swarmnode.node.peer.node" not in sys.modules, callable(front.log_name))
error = front.JoinError
print("bound", front.__dict__.get("JoinError") is error)
"""


@pytest.mark.slow
def test_the_peer_front_gives_log_name_without_loading_the_peer() -> None:
    out = subprocess.run(
        [sys.executable, "-c", PROBE], capture_output=True, text=True, check=True, timeout=50
    ).stdout.splitlines()
    assert out == ["light True True", "bound True"]  # the function, not its module of one name
