"""`swarmnode start --model cnn2d:...`: a real process trains the 2-D conv net on the bundled
digits (8x8x1 images), and a spec that cannot read the data is one line and exit 2."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from swarmnode.node.cli.command import main

REPO = Path(__file__).resolve().parents[3]
START = ["start", "--listen", "127.0.0.1:0", "--device", "cpu"]
CNN2D = "cnn2d:16k3,p2,32k3,p2,64"


@pytest.mark.slow
@pytest.mark.timeout(90)
def test_cnn2d_trains_the_digits_to_90_percent(tmp_path: Path) -> None:
    # 400 steps of batch 32 (~9 epochs) take well under a second of training; seeds 0-5 ended
    # at 94.7-97.8%, so 90% leaves room for any seed and any BLAS.
    summary_path = tmp_path / "s.json"
    run = ["--model", CNN2D, "--steps", "400", "--eval-every", "200"]
    proc = subprocess.run(
        [sys.executable, "-m", "swarmnode", *START, *run, "--summary-json", str(summary_path)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=80,
    )
    assert proc.returncode == 0, proc.stderr
    summary = json.loads(summary_path.read_text())
    assert summary["steps"] == 400
    assert summary["test_accuracy"] >= 0.90, summary


@pytest.mark.parametrize(
    ("argv", "fragment"),
    [
        # synthetic data is flat: the spec must say which image the 16 values are
        (["--data", "synthetic:64,16,3", "--model", "cnn2d:4k3"], "e.g. cnn2d:4x4,4k3"),
        (["--model", "cnn2d:8x8x2,4k3"], "give HxW or HxWxC with H*W*C = 64"),
        (["--model", "cnn2d:4k3,p9"], "maxpool2d 9 cannot pool"),
    ],
)
def test_a_cnn2d_spec_that_cannot_read_the_data_is_one_line_and_exit_2(
    argv: list[str], fragment: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main([*START, *argv]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err, err
    assert fragment in err and err.startswith("swarmnode start: error:"), err


def test_start_help_shows_the_cnn2d_spec(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        main([*START, "--help"])
    assert info.value.code == 0
    text = " ".join(capsys.readouterr().out.split())  # argparse wraps the help text
    assert "cnn2d:16k3,p2,32k3,p2,64" in text and "cnn2d:8x8,16k3,p2,64" in text
