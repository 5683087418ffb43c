"""An outbound-only peer's data counts (issue 31): real processes, no NAT needed.

Two swarms of three run at once (a shared box's load falls on both alike): in one the third peer
runs `--reachable no` (nobody dials it; it starts every exchange itself), in the control it is a
plain peer. It joins once the first two have trained together, as a peer that joins a running
swarm does: before the fix every one of its pushes was refused by the others' push bound (their
radius came from their own rounds, which never drew it), its shard never reached them, and
their logs filled with the guard's WARNINGs (docs/benchmarks.md, "Behind a NAT").
"""

from __future__ import annotations

from statistics import mean

import pytest

from tests.integration.peers import HOLD, Peer, set_slowdown
from tests.waiting import wait_for

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]

# non-iid shards: a peer's data the others never mix in costs them labels, not just samples
TRAIN = ["--model", "mlp:512", "--lr", "0.05", "--seed", "0", "--exchange", "average", "--steps", "0",
         "--partition", "dirichlet:0.5"]  # fmt: skip
STEP_S = 0.01  # a fixed step time: other processes' load does not change the pace
BEFORE = 600  # steps the first two train together before the third joins
WINDOW = 1500  # steps every peer trains with the third among them: the measured window
# How far the swarm with an outbound-only peer may end below the control (the late-window mean
# over its three peers), from 3 runs with the fix under a load of 15-20: 1.3 and 0.5 points
# below (its pushes no longer refused, but cut as pulling away from the consensus and their
# sender distrusted for a while, more often than the control's reachable third:
# docs/deploy.md, "NAT") and 0.3 above; before it, 4.0 below (90 of its ~155 pushes refused
# by each of a and b, and the push guard's WARNINGs)
ACC_SLACK = 0.03
# the loggers whose WARNINGs would say this part went wrong: the push bound refusing a sender
# again and again, the collapse guard's rollbacks, the reachability check, a failed round
WATCHED = ("gossip.robust.push_guard", "rolled back", "node.peer.reach", "exchange round")


def _start(workdir, tag: str, reachable: str) -> list[Peer]:
    a = Peer(workdir, f"{tag}a", *TRAIN, *HOLD, "--shard", "0/3").start()
    b = Peer(workdir, f"{tag}b", *TRAIN, *HOLD, "--shard", "1/3", "--join", a.addr)
    c = Peer(workdir, f"{tag}c", *TRAIN, "--step-time", str(STEP_S), "--shard", "2/3",
             "--join", a.addr, "--reachable", reachable)  # fmt: skip
    return [a, b.start(), c]


def _late_mean(evals: dict[int, float]) -> float:
    """The mean over the last sixth of a peer's evaluations (one moves by a point alone)."""
    accs = [acc for _, acc in sorted(evals.items())]
    return mean(accs[-max(1, len(accs) // 6) :])


def test_an_outbound_only_peers_pushes_are_mixed_and_its_swarm_learns_as_the_control(tmp_path):
    arms = {"o": "no", "k": "yes"}  # outbound-only third peer; the control's is reachable
    swarms: dict[str, list[Peer]] = {}
    try:
        for tag, reachable in arms.items():
            swarms[tag] = _start(tmp_path, tag, reachable)
        pairs = [p for s in swarms.values() for p in s[:2]]
        set_slowdown(pairs, 1.0, STEP_S)  # both arms' first two, released together
        wait_for(lambda: all(p.status()["self"]["step"] >= BEFORE for p in pairs), 120,
                 f"{BEFORE} steps on the first two peers")  # fmt: skip
        for s in swarms.values():
            s[2].launch()
        for s in swarms.values():
            s[2].wait_ready(90)
        peers = [p for s in swarms.values() for p in s]
        start = {p.name: p.status()["self"] for p in peers}
        evals: dict[str, dict[int, float]] = {p.name: {} for p in peers}

        def window_done() -> bool:
            for p in peers:
                me = p.status()["self"]
                if me["acc"] is not None and me["step"] > start[p.name]["step"]:
                    evals[p.name][me["step"]] = me["acc"]
            return all(max(e, default=0) >= start[n]["step"] + WINDOW for n, e in evals.items())

        wait_for(window_done, 200, f"{WINDOW} steps on every peer", every=0.1)
        end = {p.name: p.status()["self"] for p in peers}
    finally:
        for p in (p for s in swarms.values() for p in s):
            p.stop()

    def moved(name: str, key: str) -> int:
        return end[name]["exchange"][key] - start[name]["exchange"][key]

    home = end["oc"]
    assert home["reach"] == "outbound" and end["kc"]["reach"] == "direct"
    # nobody dials it: a few, before its word spread (7 under a load of 15), not one a round
    assert moved("oc", "served") <= 10, end["oc"]["exchange"]
    # it takes as large a share of rounds as the reachable third of the control: its own
    assert moved("oc", "applied") >= 0.7 * moved("kc", "applied"), (end["oc"], end["kc"])
    for name in ("oa", "ob"):  # its pushes are judged by a radius that includes it: not refused
        # A few refusals of anyone's pushes are the bound at work on a loaded box (CI saw 7
        # in one run); before the fix 90 of ~155 were refused, nearly all the third peer's.
        refused, mixed = moved(name, "pushes_refused"), moved(name, "pushes_mixed")
        assert mixed > 0 and refused <= max(2, 0.1 * (mixed + refused)), end[name]["exchange"]
    for p in (p for s in swarms.values() for p in s):  # nothing of the exchange's looks like a
        # fault (a stalled event loop under this box's load is the box's: not looked at here)
        bad = [ln for ln in p.process.log_lines(100_000)
               if " ERROR " in ln or (" WARNING " in ln and any(w in ln for w in WATCHED))]  # fmt: skip
        assert not bad, (p.name, bad[:5])
    late = {n: _late_mean(e) for n, e in evals.items()}
    swarm = {tag: mean(late[f"{tag}{x}"] for x in "abc") for tag in arms}
    assert swarm["o"] >= swarm["k"] - ACC_SLACK, late
