"""A user's own model and data through `swarmnode start` processes: `--model MODULE:FUNCTION`
alone and in a 2-peer swarm, a model that fails mid-run in a swarm, errors in the user's code
(exit 2, one line, their file and line), streamed and user-provided data, and the example run
as a script."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.integration.peers import HOLD, Peer, set_slowdown, start_swarm
from tests.waiting import wait_for

pytestmark = [pytest.mark.slow, pytest.mark.timeout(120)]

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "examples"
HELPERS = REPO / "tests" / "node" / "train"  # user_models.py: the tests' broken models
OWN = ["--model", "own_numpy_model:build", "--eval-every", "100"]


@pytest.fixture(autouse=True)
def user_path(monkeypatch: pytest.MonkeyPatch) -> None:
    """The user's folders on PYTHONPATH, as the README tells them (peers inherit it)."""
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(EXAMPLES), str(HELPERS)]))


def _start(*args: str, cwd: Path = REPO) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-m", "swarmnode", "start", "--listen", "127.0.0.1:0", *args]
    return subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=90)


def _summary(peer: Peer) -> dict:
    return json.loads((peer.dir / "summary.json").read_text())


def test_the_numpy_example_alone(tmp_path):
    out = tmp_path / "s.json"
    proc = _start(*OWN, "--steps", "600", "--summary-json", str(out), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "model own_numpy_model:build (9,610 parameters)" in proc.stdout
    assert json.loads(out.read_text())["test_accuracy"] >= 0.90


def test_the_numpy_example_in_a_two_peer_swarm(tmp_path):
    per_peer = [
        [*OWN, "--shard", f"{i}/2", "--steps", "500", "--sync-every", "10", *HOLD,
         "--summary-json", str(tmp_path / f"p{i}" / "summary.json")]
        for i in range(2)
    ]  # fmt: skip
    peers = start_swarm(tmp_path, per_peer)
    try:
        set_slowdown(peers, 1.0, step_s=0.004)  # released together, side by side
        for p in peers:
            assert p.wait_exit(60) == 0, p.tail()
        for p in peers:
            s = _summary(p)
            mixed = s["exchange_applied"] + s["exchange_served"]  # its rounds, or the other's
            assert s["test_accuracy"] >= 0.90 and mixed >= 5, s
    finally:
        for p in peers:
            p.stop()


def test_a_model_that_raises_mid_run_fails_its_peer_and_not_the_swarm(tmp_path, monkeypatch):
    monkeypatch.setenv("USER_MODEL_FAIL_AT", "60")
    healthy = [
        *OWN,
        "--steps",
        "500",
        *HOLD,
        "--summary-json",
        str(tmp_path / "p0" / "summary.json"),
    ]
    failing = [*OWN, "--model", "user_models:raises_later", "--steps", "500", *HOLD]
    peers = start_swarm(tmp_path, [healthy, failing])
    good, bad = peers
    try:
        set_slowdown(peers, 1.0, step_s=0.004)
        wait_for(lambda: bad.status()["self"]["state"] == "failed", 30, "the bad peer to fail")
        log = bad.tail(40)
        assert "raised IndexError" in log and "user_models.py:" in log, log
        wait_for(lambda: good.member_state(bad) == "left", 10, "the good peer to see it leave")
        bad.signal(signal.SIGTERM)
        assert bad.wait_exit(15) == 2
        assert good.wait_exit(60) == 0, good.tail()
        assert _summary(good)["test_accuracy"] >= 0.90
    finally:
        for p in peers:
            p.stop()


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["--model", "user_models:factory_fails"], r"raised KeyError: 'no such key', at "),
        (["--model", "user_models:wrong_shape"], r"returned a gradient of float32\[9609\]"),
        (["--model", "user_models:raises"], r"raised IndexError: .*, at "),
        (["--data", "user_models:nothing_here"], r"has no 'nothing_here'"),
        (
            ["--data", "user_models:data_fails"],
            r"data user_models:data_fails raised FileNotFoundError: .*, at ",
        ),
    ],
)
def test_an_error_in_the_users_code_is_one_line_with_its_place_and_exit_2(args, expected):
    proc = _start(*args)
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("swarmnode start: error: "), proc.stderr
    assert re.search(expected, lines[0]), lines[0]
    if "nothing_here" not in args[1]:
        assert str(HELPERS / "user_models.py") in lines[0]
    assert "listening" not in proc.stdout  # refused before it served anyone


def test_a_streamed_folder_sharded_and_a_users_data_source(tmp_path):
    import numpy as np
    from swarmnode.node.train.data.datasets import make_synthetic

    data = make_synthetic(4000, 16, 4, seed=3)
    for name in ("X_train", "y_train", "X_test", "y_test"):
        np.save(tmp_path / f"{name}.npy", getattr(data, name))
    out = tmp_path / "s.json"
    args = ["--data", str(tmp_path), "--shard", "1/2", "--model", "linear", "--steps", "300"]
    proc = _start(*args, "--summary-json", str(out))
    assert proc.returncode == 0, proc.stderr
    assert "2000 training samples" in proc.stdout
    assert json.loads(out.read_text())["test_accuracy"] >= 0.8
    # a regression, model and data both the user's: float targets, no accuracy
    reg = ["--model", "user_models:Regression", "--data", "user_models:regression_data"]
    proc = _start(*reg, "--steps", "300", "--summary-json", str(out))
    assert proc.returncode == 0, proc.stderr
    summary = json.loads(out.read_text())
    assert summary["test_loss"] < 1e-3 and summary["test_accuracy"] is None  # NaN in JSON


def test_the_example_as_a_script_runs_a_two_peer_swarm():
    proc = subprocess.run(
        [sys.executable, str(EXAMPLES / "own_numpy_model.py")],
        capture_output=True, text=True, timeout=90, cwd=REPO,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    accs = [float(line.split()[4].rstrip("%")) for line in proc.stdout.splitlines()]
    assert len(accs) == 2 and min(accs) >= 90.0, proc.stdout
