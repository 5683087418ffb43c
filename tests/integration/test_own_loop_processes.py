"""examples/own_loop_numpy.py as a user runs it (real processes): alone, and as a 2-peer swarm
(a founder and a `--join`er, each on its half of the digits); the swarm's worst peer is not
worse than the same loop alone on one half, over the late window of evaluations (the mean of
the last sixth, as docs/benchmarks.md measures learning)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

pytestmark = [pytest.mark.slow, pytest.mark.timeout(120)]

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "examples" / "own_loop_numpy.py"
RUN = ["--steps", "600", "--eval-every", "25", "--sync-every", "10"]
MARGIN = 0.03  # accuracy: a run's spread on 360 test images is about 1 point


def _late(path: Path) -> float:
    evals = json.loads(path.read_text())
    late = evals[-max(1, len(evals) // 6) :]
    return float(np.mean([e["test_acc"] for e in late]))


def _example(*args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, str(EXAMPLE), *args], cwd=REPO, text=True,
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
    )  # fmt: skip


def _finish(proc: subprocess.Popen[str]) -> str:
    out, _ = proc.communicate(timeout=90)
    assert proc.returncode == 0, out
    return out


def test_the_numpy_example_alone_and_in_a_two_peer_swarm(tmp_path):
    alone = _example(*RUN, "--shard", "0/2", "--no-swarm", "--json", str(tmp_path / "alone.json"))
    _finish(alone)
    paced = ["--step-time", "0.004"]  # ~2.5 s each: the two train side by side
    founder = _example(*RUN, *paced, "--shard", "0/2", "--wait-peers", "1",
                       "--json", str(tmp_path / "p0.json"))  # fmt: skip
    try:
        first = founder.stdout.readline() if founder.stdout else ""
        assert first.startswith("swarm at "), first
        addr = first.split()[-1]
        joiner = _example(*RUN, *paced, "--shard", "1/2", "--join", addr,
                          "--json", str(tmp_path / "p1.json"))  # fmt: skip
        outs = [_finish(joiner), _finish(founder)]
    finally:
        founder.kill()
    for out in outs:  # each exchanged, and never waited long on the other
        rounds = int(out.split("rounds ")[1].split()[0])
        assert rounds >= 20, out
    worst = min(_late(tmp_path / f"p{i}.json") for i in range(2))
    assert worst >= _late(tmp_path / "alone.json") - MARGIN
    assert worst >= 0.85
