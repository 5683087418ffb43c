"""Five real peers, one of which lies about its parameters: Krum survives it, the mean does not.

Every peer runs `--exchange robust --pull 4 --byzantine-f 1` on a fifth of the digits (iid);
peer p4 serves poisoned parameters. The swarm starts held and is released together, trains
until every honest peer has made `WINDOW` steps, and each honest peer's accuracy is the mean of
its last few evaluations (one evaluation on 360 test images moves by a point or two).
"""

from __future__ import annotations

import signal
from pathlib import Path

import pytest
from swarmnode.gossip.wire.control import encode_control

from tests.integration.peers import HOLD, Peer, set_slowdown, start_swarm
from tests.waiting import wait_for

pytestmark = [pytest.mark.slow, pytest.mark.timeout(180)]

WINDOW = 1200  # steps every honest peer makes after the release
MEAN_WINDOW = 500  # the plain mean's run: its last evaluations are 250-500 steps in
LAST = 6  # evaluations averaged into a peer's final accuracy (one moves by 1-2 points)
HONEST = ["p0", "p1", "p2", "p3"]
# noise:3 serves pure N(0, 9) per coordinate: the plain mean of 5 models adds noise of std 0.6
# to every weight each round (0.3 after the 0.5 mix), several times the weights' own size, so
# the honest models never recover; Krum never selects a row that far from the others. A sign
# flip was used before: a -9x model wipes the mean's models each round, but they relearn much
# of it within the 5 local steps before the next one, and the measured drop (8-15 points) sat
# on the bar and failed about every other run.
LIAR = "noise:3"


def swarm_args(aggregator: str) -> list[str]:
    return ["--steps", "0", "--eval-every", "50", "--exchange", "robust", "--pull", "4",
            "--byzantine-f", "1", "--aggregator", aggregator, "--sync-every", "5",
            "--partition", "iid", *HOLD]  # fmt: skip


def start(
    workdir: Path, aggregator: str, liar: str | None, extra: tuple[str, ...] = ()
) -> list[Peer]:
    per_peer = [[*swarm_args(aggregator), *extra, "--shard", f"{i}/5"] for i in range(5)]
    if liar is not None:
        per_peer[4] += ["--byzantine", liar]
    return start_swarm(workdir, per_peer)


class Run:
    """One held five-peer swarm; `released()` paces it, `poll()` records honest evaluations."""

    def __init__(self, workdir: Path, aggregator: str, liar: str | None, window: int) -> None:
        self.peers = start(workdir, aggregator, liar)
        self.window = window
        self.stopped = False
        self.honest = [p for p in self.peers if p.name in HONEST]
        self.evals: dict[str, dict[int, float]] = {p.name: {} for p in self.honest}
        self.start_step: dict[str, int] = {}
        self.done: set[str] = set()

    def release(self) -> None:
        set_slowdown(self.peers, 20)  # ~100 steps/s: about `--sync-every` steps per round
        self.start_step = {p.name: p.status()["self"]["step"] for p in self.honest}

    def poll(self) -> bool:
        """True once every honest peer made `window` steps (or reports a failed training); the
        swarm is stopped then, and its CPU goes to the runs still going."""
        if self.stopped:
            return True
        for p in self.honest:
            me = p.status()["self"]
            if me["acc"] is not None:
                self.evals[p.name][me["step"]] = me["acc"]  # `step` moves at evaluations
            if me["step"] >= self.start_step[p.name] + self.window or me["state"] == "failed":
                self.done.add(p.name)
        if len(self.done) == len(self.honest):
            self.stop()
        return self.stopped

    def accuracy(self) -> dict[str, float]:
        """Honest peer name -> mean of its last `LAST` evaluations."""
        out = {}
        for name, evals in self.evals.items():
            last = [acc for _, acc in sorted(evals.items())[-LAST:]]
            out[name] = sum(last) / len(last)
        return out

    def stop(self) -> None:
        for p in self.peers:
            p.stop()
        self.stopped = True


def honest_accuracy(workdir: Path, *configs: tuple[str, str | None, int]) -> list[dict[str, float]]:
    """Run one swarm per (aggregator, liar, window) side by side (same load, less wall time)."""
    runs: list[Run] = []
    try:
        for i, (aggregator, liar, window) in enumerate(configs):
            runs.append(Run(workdir / f"run{i}", aggregator, liar, window))
        for run in runs:
            run.release()
        wait_for(lambda: all([r.poll() for r in runs]), 150, f"{WINDOW} steps", every=0.2)
    finally:
        for run in runs:
            run.stop()
    return [run.accuracy() for run in runs]


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict[str, dict[str, float]]:
    """p0..p3's accuracies in three swarms run side by side (the same shards and seeds, one
    wall time): `clean` (Krum, nobody lying), `krum` (Krum, p4 serving noise), `mean` (the
    plain mean, p4 serving noise). The mean's run ends after `MEAN_WINDOW` steps: its honest
    peers are wrecked from the first rounds on, and its CPU then goes to the other two."""
    clean, krum, mean = honest_accuracy(
        tmp_path_factory.mktemp("byz"),
        ("krum", None, WINDOW),
        ("krum", LIAR, WINDOW),
        ("mean", LIAR, MEAN_WINDOW),
    )
    return {"clean": clean, "krum": krum, "mean": mean}


def _mean(accs: dict[str, float]) -> float:
    return sum(accs.values()) / len(accs)


def test_krum_keeps_honest_peers_within_two_points_of_the_clean_run(runs):
    # What the liar costs each honest peer: its accuracy against the same peer (same shard,
    # same seed) in the clean run, and the honest mean against the clean mean. Against the
    # clean mean alone, a peer's shard counted as the liar's doing: p2 ended lowest in all 10
    # runs beside two busy loops, clean and attacked alike, 0.5-1.7 points under the clean
    # mean; and before Krum's pick left out the peer's own model (robust_round.py), the hub of
    # a star (it picked itself in 72-95% of its rounds) learnt from nobody, and one peer ended
    # 2.6-2.7 points under the clean mean in two full runs. Since, beside two busy loops: each
    # peer within 0.5 of its clean twin, the mean within 0.1 of the clean mean (the mean rule
    # below misses it by 29-47 points).
    clean, accs = runs["clean"], runs["krum"]
    assert all(accs[n] >= clean[n] - 0.02 for n in accs), (clean, accs)
    assert _mean(accs) >= _mean(clean) - 0.01, (clean, accs)


def test_the_mean_lets_one_liar_wreck_every_honest_peer(runs):
    clean, accs = _mean(runs["clean"]), runs["mean"]
    # Measured on 2026-11-23: every honest peer 29-47 points below the clean run.
    assert all(acc < clean - 0.10 for acc in accs.values()), (clean, accs)
    assert sum(accs.values()) / len(accs) < clean - 0.15, (clean, accs)


def test_an_honest_peer_diverged_by_a_huge_model_stays_up_and_reports_failed(tmp_path):
    """`huge` (x 1e6) mixed in by the mean makes honest training diverge (NaN loss). Such a peer
    must not vanish: it leaves the exchange, stops serving its model, and answers /v1/status.

    Not every honest peer need diverge: a ReLU net scaled up keeps its argmax, and a peer that
    mixed in the huge model only after others had already failed (and left) may sit at a huge
    but finite loss, as the liar itself does. So the test waits for *a* failed honest peer and
    checks every one that failed (all four usually, within seconds; once, under the full
    suite's load, the last one never diverged within 60 s).

    Issue 22's bounds are off (`--push-budget off`): their collapse guard rolls back a mix
    whose loss jumps while it is still finite, and then no peer diverges (it did, in one of
    two full runs): what is tested here is how a diverged peer behaves, not whether one does."""
    peers = start(tmp_path, "mean", "huge", ("--push-budget", "off"))
    honest = [p for p in peers if p.name in HONEST]
    liar = peers[4]
    try:
        set_slowdown(peers, 20)
        failed = wait_for(lambda: _failed(honest), 60, "an honest peer to fail")
        for p in failed:
            assert p.proc is not None and p.proc.poll() is None, p.tail()  # still up
            assert p.status()["self"]["state"] == "failed", p.tail()  # and stays failed
            assert "diverged" in p.tail(50), p.tail()
        # the others were told: a failed peer left the swarm, nobody samples it any more
        for p in failed:
            wait_for(lambda p=p: liar.member_state(p) == "left", 10, f"{p.name} marked left")
        # it refuses to hand out its model (503), so it cannot spread the damage further
        with pytest.raises(OSError, match="503"):
            failed[0].post("params", encode_control("pull", sender="test"))
        # SIGTERM still ends it, with the training error's exit code
        failed[0].signal(signal.SIGTERM)
        assert failed[0].wait_exit(15) == 2
    finally:
        for p in peers:
            p.stop()


def _failed(peers: list[Peer]) -> list[Peer]:
    """The peers whose /v1/status says their training failed."""
    return [p for p in peers if p.status()["self"]["state"] == "failed"]
