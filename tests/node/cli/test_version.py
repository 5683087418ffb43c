"""`swarmnode --version` names the release and both wire versions a swarm's peers must share:
the protocol of its control messages and the envelope (a peer of another one is refused 426)."""

from __future__ import annotations

import pytest
from swarmnode.gossip.auth import VERSION as ENVELOPE_VERSION
from swarmnode.gossip.wire import PROTOCOL_VERSION
from swarmnode.node.cli.command import main

from swarmnode import __version__

pytestmark = pytest.mark.timeout(30)


def test_version_names_the_release_its_protocol_and_its_envelope(capsys) -> None:
    with pytest.raises(SystemExit) as info:
        main(["--version"])
    assert info.value.code == 0
    assert capsys.readouterr().out.strip() == (
        f"swarmnode {__version__} (protocol v{PROTOCOL_VERSION}, envelope v{ENVELOPE_VERSION})"
    )
