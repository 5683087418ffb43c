"""SIGKILL a training peer at varied moments: every checkpoint file left behind is whole (never
torn), and a restart resumes from the newest one's step (not from 0)."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from swarmnode.node.train.checkpoint import list_checkpoints, load_checkpoint

REPO = Path(__file__).resolve().parents[3]
EVERY = 5  # checkpoint every 5 steps: writes are frequent, so kills often land mid-write
KILLS = 4
# Port 0: the peer binds a free port, so runs never collide with another peer on 7070.
START = ["start", "--listen", "127.0.0.1:0"]


def _start(ckdir: Path, log: Path, steps: int, summary: Path | None = None) -> subprocess.Popen:
    cmd = [
        sys.executable, "-m", "swarmnode", *START, "--model", "mlp:16", "--device", "cpu",
        "--steps", str(steps), "--eval-every", "1000000", "--checkpoint-dir", str(ckdir),
        "--checkpoint-every", str(EVERY),
    ]  # fmt: skip
    if summary is not None:
        cmd += ["--summary-json", str(summary)]
    with log.open("w") as out:
        return subprocess.Popen(cmd, cwd=REPO, stdout=out, stderr=subprocess.STDOUT, text=True)


def _newest_step(ckdir: Path) -> int:
    found = list_checkpoints(ckdir)
    return found[0][0] if found else -1


def _wait_for(cond, proc: subprocess.Popen, log: Path, timeout: float = 60.0) -> None:
    end = time.monotonic() + timeout
    while not cond():
        assert proc.poll() is None, f"peer exited early ({proc.returncode}):\n{log.read_text()}"
        assert time.monotonic() < end, f"timed out; peer output:\n{log.read_text()}"
        time.sleep(0.002)


def _assert_every_checkpoint_is_whole(ckdir: Path) -> int:
    """Strict-load every `ckpt-*` file (load_latest would skip a torn newest one and hide
    exactly the failure this test exists for); return the newest step."""
    found = list_checkpoints(ckdir)
    assert found, "no checkpoint after SIGKILL"
    for step, path in found:
        state = load_checkpoint(path)  # CheckpointError (failing the test) if torn or corrupt
        assert state["step"] == step, f"{path.name} holds step {state['step']}"
        assert np.isfinite(state["params"]).all(), f"{path.name} has non-finite parameters"
    return found[0][0]


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_sigkill_never_loses_the_last_good_checkpoint(tmp_path: Path) -> None:
    ckdir = tmp_path / "ck"
    log = tmp_path / "peer.log"
    last = 0
    for kill in range(KILLS):
        proc = _start(ckdir, log, steps=10**9)
        try:
            # Kill after a varying number of new checkpoints (1, 2, 3, ...) past the resume point:
            # the moment relative to the next write (before, during, after the rename) varies too.
            target = last + (kill + 1) * EVERY
            _wait_for(lambda t=target: _newest_step(ckdir) >= t, proc, log)
            proc.send_signal(signal.SIGKILL)
            proc.wait(timeout=30)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        if kill > 0:
            assert f"resumed from checkpoint step {last}" in log.read_text(), log.read_text()
        newest = _assert_every_checkpoint_is_whole(ckdir)
        assert newest > last and newest % EVERY == 0
        last = newest

    # A final restart resumes from the surviving step and finishes a short budget.
    summary = tmp_path / "summary.json"
    proc = _start(ckdir, log, steps=last + 3, summary=summary)
    assert proc.wait(timeout=60) == 0, log.read_text()
    result = json.loads(summary.read_text())
    assert result["resumed_from_step"] == last and result["steps"] == last + 3
