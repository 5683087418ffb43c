"""What `swarmnode start` says of itself must be true (issue 34, item 9): "checkpointing" on
SIGINT only with a checkpoint dir, the logit-adjustment line only on a label-skewed shard, and
a resumed checkpoint that the swarm's model then replaces says which one won."""

from __future__ import annotations

import io
import json
import re
import signal
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
from swarmnode.node.cli.run_peer import _resumed_line, _Stopper, run_peer
from swarmnode.node.settings import PeerConfig

from tests.waiting import wait_for

pytestmark = pytest.mark.timeout(60)


@pytest.mark.parametrize(
    ("checkpointing", "said"),
    [
        (False, "SIGINT: leaving the swarm, no --checkpoint-dir to save to, exiting"),
        (True, "SIGINT: leaving the swarm, saving a checkpoint, exiting"),
    ],
)
async def test_a_signal_says_checkpointing_only_with_a_checkpoint_dir(
    checkpointing: bool, said: str
) -> None:
    out = io.StringIO()
    _Stopper(out, checkpointing)._on_signal(signal.SIGINT)
    assert out.getvalue().strip() == said


def _lines(**kw: object) -> list[str]:
    out = io.StringIO()
    cfg = PeerConfig(
        **{"listen": "127.0.0.1:0", "model": "mlp:8", "device": "cpu", "steps": 3, **kw}
    )
    run_peer(cfg, out)
    return out.getvalue().splitlines()


def test_an_iid_shard_announces_no_logit_adjustment() -> None:
    device = next(line for line in _lines(shard=(0, 2)) if line.startswith("device "))
    assert "logit adjustment" not in device, device


def test_a_label_skewed_shard_still_announces_it() -> None:
    lines = _lines(shard=(1, 4), partition="dirichlet:0.3")
    device = next(line for line in lines if line.startswith("device "))
    assert "logit adjustment 0.5 (label-skewed shard)" in device, device


@pytest.mark.parametrize(
    ("kw", "said"),
    [
        (
            {"steps": 300},
            "lr 0.05 (sgd), cosine, warm-up 100 to 0.1 x peak at step 300; in a swarm x "
            "sqrt(n peers) (--lr-scale auto)",
        ),
        (
            {"steps": 300, "lr_scale": "none"},
            "lr 0.05 (sgd), cosine, warm-up 100 to 0.1 x peak at step 300",
        ),
        ({"steps": 3, "lr_schedule": "constant"}, "lr 0.05 (sgd), constant"),
        (
            {"steps": 3, "lr_schedule": "constant", "lr_scale": "linear"},
            "lr 0.05 (sgd), constant; in a swarm x n peers (--lr-scale linear)",
        ),
        # auto without a horizon past the warm-up keeps its lr, and says how to give it one
        (
            {"steps": 3},
            "lr 0.05 (sgd), constant (--lr-schedule auto: the decay would end at step 3, "
            "inside the 100-step warm-up)",
        ),
    ],
)
def test_the_start_says_which_lr_schedule_runs(kw: dict, said: str) -> None:
    lines = _lines(**kw)
    assert said in lines, lines


def _node(synced: int | None, join: list[str]) -> SimpleNamespace:
    return SimpleNamespace(
        start_step=2000,
        resumed={"_path": "ck/step-2000.ckpt"},
        synced_step=synced,
        cfg=SimpleNamespace(join=join),
    )


def test_a_resume_says_which_model_won_the_join() -> None:
    assert _resumed_line(_node(51475, ["a:7070"])) == (
        "resumed from checkpoint step 2000 (ck/step-2000.ckpt); the swarm was ahead: "
        "starting from its model at step 51475"
    )
    assert _resumed_line(_node(None, ["a:7070"])).endswith("; the swarm's model did not replace it")
    assert _resumed_line(_node(None, [])) == "resumed from checkpoint step 2000 (ck/step-2000.ckpt)"


REPO = Path(__file__).resolve().parents[3]
SMALL = ["--listen", "127.0.0.1:0", "--model", "mlp:8", "--device", "cpu"]


def _popen(args: list[str], out: Path) -> subprocess.Popen[bytes]:
    with out.open("w") as sink:
        return subprocess.Popen(
            [sys.executable, "-m", "swarmnode", "start", *SMALL, *args],
            cwd=REPO, stdout=sink, stderr=subprocess.STDOUT,
        )  # fmt: skip


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_a_resumed_joiner_says_the_swarms_model_replaced_its_checkpoint(tmp_path: Path) -> None:
    ckdir = tmp_path / "ck"
    done = subprocess.run(
        [sys.executable, "-m", "swarmnode", "start", *SMALL, "--steps", "10",
         "--checkpoint-dir", str(ckdir), "--checkpoint-every", "5"],
        cwd=REPO, capture_output=True, timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    ready, seed_out, joiner_out = tmp_path / "seed.json", tmp_path / "seed.txt", tmp_path / "j.txt"
    seed = _popen(["--steps", "0", "--eval-every", "50", "--ready-file", str(ready)], seed_out)
    joiner = None
    try:
        swarm_past_200 = lambda: re.search(r"^step +[2-9]\d\d ", seed_out.read_text(), re.M)  # noqa: E731
        wait_for(lambda: swarm_past_200() or seed.poll(), 60, "the swarm's step 200")
        addr = json.loads(ready.read_text())["addr"]
        joiner = _popen(
            ["--join", addr, "--checkpoint-dir", str(ckdir), "--steps", "100000000"], joiner_out
        )
        line = wait_for(
            lambda: next((ln for ln in joiner_out.read_text().splitlines()
                          if ln.startswith("resumed from")), None) or joiner.poll(),
            60, "the joiner's resume line",
        )  # fmt: skip
    finally:
        for proc in (p for p in (joiner, seed) if p is not None):
            if proc.poll() is None:
                proc.terminate()
                try:
                    proc.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
    assert isinstance(line, str), joiner_out.read_text()[-3000:]
    assert line.startswith("resumed from checkpoint step 10 (") and (
        "; the swarm was ahead: starting from its model at step " in line
    ), line
