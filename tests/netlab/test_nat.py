"""The NAT lab (issue 31) with real peers in real namespaces (root only; CI runs as root, with
`iptables` installed): docs/deploy.md's quickstart lines typed word for word, the third from
behind a masquerading router whose inside is a black hole from outside. The home peer finds out
it cannot be dialled, says so in one INFO line, and trains with the swarm by dialling out; the
reachable peers stop dialling into the NAT once they learn it."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from scripts.netlab import nat, net

_WHY = net.can_use_namespaces() or (None if shutil.which("iptables") else "needs iptables")
pytestmark = [
    pytest.mark.slow,
    pytest.mark.timeout(240),
    pytest.mark.skipif(_WHY is not None, reason=f"NAT lab: {_WHY}"),
]


def test_a_peer_behind_a_nat_joins_with_the_quickstart_line_and_runs_outbound_only() -> None:
    got = nat.run(20.0, "")
    home, a, b = (got["self"][n] for n in ("home", "a", "b"))
    assert home["reach"] == "outbound" and a["reach"] == b["reach"] == "direct"
    log = (got["logs"] / "home.log").read_text().splitlines()
    said = [ln for ln in log if "node.peer.reach" in ln]
    assert len(said) == 1 and " INFO " in said[0], said
    assert "cannot dial this peer at 198.19." in said[0] and "forward port 7070" in said[0]
    assert home["exchange"]["applied"] > 20  # it trains with the swarm, by its own dials
    assert home["exchange"]["served"] == 0  # nobody dialled it
    # the dials into the NAT are those before the verdict spread (a few), not one per round
    assert max(got["failed"]["a"], got["failed"]["b"]) <= 10, got["failed"]
    # nothing of this part's looks like a fault: the reachability check, and the push bound
    # and collapse guard on home's pushes (every one was refused before the others' rounds drew
    # it: gossip/exchange/outbound.py); open admission's WARNING is meant for a real network
    watched = ("node.peer.reach", "dialback", "gossip.robust.push_guard", "rolled back")
    for name in ("a", "b", "home"):
        text = (got["logs"] / f"{name}.log").read_text().splitlines()
        bad = [
            ln
            for ln in text
            if " ERROR " in ln or (" WARNING " in ln and any(w in ln for w in watched))
        ]
        assert not bad, bad
    for name in ("a", "b"):  # home's pushes are judged by a radius that includes it
        # every push of home's was refused before; a few are on a busy box (22 of ~2,000 in a
        # full run beside three benches), when home's model lags a round behind the radius
        ex = got["self"][name]["exchange"]
        assert ex["pushes_refused"] <= 3 + 0.05 * (ex["pushes_mixed"] + ex["pushes_refused"]), ex
