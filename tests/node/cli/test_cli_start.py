"""`swarmnode start` end to end: progress, summary JSON, errors, signals, resume."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from swarmnode.node.cli.command import main
from swarmnode.node.train.checkpoint import list_checkpoints, load_latest

from tests.node.train.lock_holder import lock_held_elsewhere
from tests.waiting import wait_for

REPO = Path(__file__).resolve().parents[3]
SMALL = ["--model", "mlp:16", "--device", "cpu"]
# Port 0: the peer binds a free port, so runs never collide with another peer on 7070.
START = ["start", "--listen", "127.0.0.1:0"]


def _swarmnode(*args: str, timeout: float = 90) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "swarmnode", *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


@pytest.mark.slow
@pytest.mark.timeout(90)
def test_short_run_prints_progress_and_writes_summary(tmp_path: Path) -> None:
    summary_path = tmp_path / "out" / "summary.json"
    proc = _swarmnode(
        *START, *SMALL, "--steps", "60", "--eval-every", "20", "--summary-json", str(summary_path)
    )
    assert proc.returncode == 0, proc.stderr
    progress = [line for line in proc.stdout.splitlines() if line.startswith("step ")]
    assert len(progress) == 3
    assert all("test_acc" in line and "samples/s" in line for line in progress)
    summary = json.loads(summary_path.read_text())
    assert summary["steps"] == 60
    assert 0.0 <= summary["test_accuracy"] <= 1.0 and summary["test_loss"] > 0
    assert summary["samples_per_s"] > 0 and summary["wall_s"] > 0
    assert summary["device"].startswith("cpu")
    assert summary["logit_adjust"] == 0.0  # all of the data: nothing to adjust


@pytest.mark.slow
@pytest.mark.timeout(90)
def test_a_label_skewed_shard_trains_logit_adjusted_and_says_so(tmp_path: Path) -> None:
    summary_path = tmp_path / "summary.json"
    shard = ["--shard", "1/4", "--partition", "dirichlet:0.3", "--logit-adjust", "0.7"]
    proc = _swarmnode(*START, *SMALL, *shard, "--steps", "20", "--summary-json", str(summary_path))
    assert proc.returncode == 0, proc.stderr
    assert "logit adjustment 0.7 (label-skewed shard)" in proc.stdout
    assert json.loads(summary_path.read_text())["logit_adjust"] == 0.7


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_defaults_reach_96_percent_on_digits(tmp_path: Path) -> None:
    # The README's promise: a plain `swarmnode start` trains the bundled digits to >= 96%.
    summary_path = tmp_path / "s.json"
    proc = _swarmnode(*START, "--device", "cpu", "--summary-json", str(summary_path), timeout=110)
    assert proc.returncode == 0, proc.stderr
    summary = json.loads(summary_path.read_text())
    assert summary["test_accuracy"] >= 0.96, summary


def test_blas_threads_default_to_one_unless_the_user_chose(monkeypatch: pytest.MonkeyPatch) -> None:
    from swarmnode.node.cli import command as cli

    for var in cli._BLAS_THREAD_VARS:
        monkeypatch.delenv(var, raising=False)
    cli._default_to_one_blas_thread()
    assert all(os.environ[v] == "1" for v in cli._BLAS_THREAD_VARS)
    for var in cli._BLAS_THREAD_VARS:
        monkeypatch.delenv(var)
    monkeypatch.setenv("OMP_NUM_THREADS", "4")
    cli._default_to_one_blas_thread()
    assert os.environ["OMP_NUM_THREADS"] == "4" and "OPENBLAS_NUM_THREADS" not in os.environ


def test_help_explains_every_option(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        main([*START, "--help"])
    assert info.value.code == 0
    text = capsys.readouterr().out
    for option in [
        "--model", "--data", "--steps", "--batch-size", "--lr", "--optimizer", "--momentum",
        "--weight-decay", "--device", "--seed", "--eval-every", "--checkpoint-dir",
        "--checkpoint-every", "--summary-json", "--shard", "--partition",
    ]:  # fmt: skip
        assert option in text
    assert "default" in text


@pytest.mark.parametrize(
    ("argv", "fragment"),
    [
        (["--model", "nosuchmodel:3"], "nosuchmodel"),
        (["--data", "/nonexistent/data.npz"], "not found"),
        (["--data", "synthetic:10,4"], "synthetic"),
        (["--steps", "-5"], "--steps"),
        (["--lr", "0"], "--lr"),
        (["--shard", "0/2000"], "shards"),
        (["--seed", "-1"], "--seed must be an integer >= 0"),
        (["--logit-adjust", "-1"], "--logit-adjust"),
        (["--model", "mlp:\u00b2"], "bad layer width"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(
    argv: list[str], fragment: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main([*START, "--device", "cpu", *argv]) == 2
    err = capsys.readouterr().err.strip()
    assert (
        len(err.splitlines()) == 1 and fragment in err and err.startswith("swarmnode start: error:")
    )


def _one_line_error(capsys: pytest.CaptureFixture[str]) -> str:
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err, err
    return err


@pytest.mark.parametrize("where", ["parent_is_a_file", "is_a_directory"])
def test_bad_summary_json_path_fails_at_start(
    tmp_path: Path, where: str, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "afile").write_text("x")
    path = tmp_path / "afile" / "s.json" if where == "parent_is_a_file" else tmp_path
    started = time.monotonic()
    # A million steps: were the path checked only when the summary is written, this would train.
    argv = [*START, *SMALL, "--steps", "1000000", "--summary-json", str(path)]
    assert main(argv) == 2
    assert time.monotonic() - started < 20
    err = _one_line_error(capsys)
    assert "--summary-json" in err and str(path) in err


def test_checkpoint_dir_that_is_a_file_fails_at_start(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "afile"
    path.write_text("x")
    assert main([*START, *SMALL, "--steps", "1000000", "--checkpoint-dir", str(path)]) == 2
    err = _one_line_error(capsys)
    assert "--checkpoint-dir" in err and "not a directory" in err


@pytest.mark.slow
@pytest.mark.timeout(60)
def test_second_process_on_a_checkpoint_dir_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ckdir = tmp_path / "ck"
    with lock_held_elsewhere(ckdir) as pid:
        assert main([*START, *SMALL, "--steps", "5", "--checkpoint-dir", str(ckdir)]) == 2
        err = _one_line_error(capsys)
        assert f"checkpoint dir {ckdir} is in use by another swarmnode process" in err
        assert f"(pid {pid})" in err
        assert not list_checkpoints(ckdir)  # refused before it trained or wrote anything
    # The holder is gone, and with it its lock (the kernel drops it): the dir is usable again.
    assert main([*START, *SMALL, "--steps", "5", "--checkpoint-dir", str(ckdir)]) == 0


# Per verb, options its --help must mention: the ones a user reaches for first.
VERB_KEY_OPTIONS = {
    "start": ["--model", "--data", "--steps", "--checkpoint-dir", "--join", "--listen"],
    "status": ["--peer", "--timeout", "--json", "--watch", "--interval", "--count"],
    "demo": ["--report", "--quick"],
    "chaos": ["SCENARIO", "--report", "--peer-command", "--no-plot", "--quiet"],
    "keygen": ["--out"],
}


def test_every_verb_has_a_help_test() -> None:
    from swarmnode.node.cli.command import VERB_MODULES

    assert {m.removeprefix("swarmnode.node.cli.cmd_") for m in VERB_MODULES} == set(
        VERB_KEY_OPTIONS
    )


@pytest.mark.parametrize("verb", sorted(VERB_KEY_OPTIONS))
def test_verb_help_exits_0_and_names_its_options(
    verb: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as info:
        main([verb, "--help"])
    assert info.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith(f"usage: swarmnode {verb}")
    for option in VERB_KEY_OPTIONS[verb]:
        assert option in out, f"{verb} --help does not mention {option}"
    flat = " ".join(out.split())  # argparse wraps lines
    assert "(default: None)" not in flat and "(default: False)" not in flat
    assert flat.count("(default: ./runs/") <= 1  # a default the help names is not added again


def test_unavailable_device_is_one_line_and_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    try:
        import cupy  # noqa: F401

        pytest.skip("cupy is installed here; --device cuda may be valid")
    except ImportError:
        pass
    assert main([*START, "--device", "cuda", "--steps", "1"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "cuda" in err.lower()


def test_argparse_errors_exit_2_in_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    for argv in ([*START, "--lrr", "0.1"], [*START, "--steps"], ["nosuchverb"]):
        with pytest.raises(SystemExit) as info:
            main(argv)
        assert info.value.code == 2
        _one_line_error(capsys)
    with pytest.raises(SystemExit):
        main([*START, "--lrr", "0.1"])
    assert "did you mean '--lr'?" in _one_line_error(capsys)


@pytest.mark.parametrize(
    ("argv", "fragment"),
    [
        (["--lr", "abc"], "--lr: expected a number, got 'abc'"),
        (["--shard", "4/4"], "--shard: bad shard '4/4'"),
        (["--partition", "dirichlet:0"], "--partition: bad partition 'dirichlet:0'"),
        (["--steps", "many"], "--steps: expected an integer"),
        (["--exchange", "gossip"], "--exchange: 'gossip' is not one of average, robust"),
    ],
)
def test_bad_values_are_one_line_without_the_usage(
    argv: list[str], fragment: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main([*START, *argv]) == 2
    assert fragment in _one_line_error(capsys)


@pytest.mark.slow
@pytest.mark.timeout(120)
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_signal_stops_cleanly_checkpoints_and_resumes(tmp_path: Path, sig: signal.Signals) -> None:
    ckdir = tmp_path / "ck"
    summary_path = tmp_path / "s.json"
    proc = subprocess.Popen(
        [sys.executable, "-m", "swarmnode", *START, *SMALL, "--steps", "100000000",
         "--eval-every", "1000000", "--checkpoint-dir", str(ckdir), "--checkpoint-every", "50",
         "--summary-json", str(summary_path)],
        cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        wait_for(lambda: list_checkpoints(ckdir) or proc.poll() is not None, 60, "a checkpoint")
        proc.send_signal(sig)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, err
    summary = json.loads(summary_path.read_text())
    stopped_at = summary["steps"]
    assert 50 <= stopped_at < 100000000
    assert load_latest(ckdir)["step"] == stopped_at  # the final checkpoint is the stopping step
    assert sig.name in out

    more = _swarmnode(
        *START, *SMALL, "--steps", str(stopped_at + 7), "--checkpoint-dir", str(ckdir),
        "--summary-json", str(summary_path),
    )  # fmt: skip
    assert more.returncode == 0, more.stderr
    assert f"resumed from checkpoint step {stopped_at}" in more.stdout
    summary = json.loads(summary_path.read_text())
    assert summary["steps"] == stopped_at + 7 and summary["steps_this_run"] == 7


def test_resume_with_another_model_is_refused(tmp_path: Path, capsys) -> None:
    ck = str(tmp_path / "ck")
    assert main([*START, *SMALL, "--steps", "3", "--checkpoint-dir", ck]) == 0
    assert main([*START, "--device", "cpu", "--model", "mlp:8", "--checkpoint-dir", ck]) == 2
    assert "another --checkpoint-dir" in capsys.readouterr().err


@pytest.mark.slow
def test_console_script_is_installed() -> None:
    script = Path(sys.executable).parent / "swarmnode"
    if not script.exists():
        pytest.skip("swarmnode not installed into this interpreter's bin dir")
    proc = subprocess.run([str(script), "--help"], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0 and "start" in proc.stdout
    assert os.access(script, os.X_OK)


def test_keygen_writes_a_private_key_only_its_owner_reads_and_never_overwrites(tmp_path) -> None:
    from swarmnode.gossip.auth.operator import OperatorKey, OperatorVerifier

    assert main(["keygen", "--out", str(tmp_path)]) == 0
    assert (tmp_path / "operator.key").stat().st_mode & 0o777 == 0o600
    key, verifier = (
        OperatorKey.load(tmp_path / "operator.key"),
        OperatorVerifier.load(tmp_path / "operator.pub"),
    )
    verifier.name = "127.0.0.1:1"
    assert verifier.open("admin/x", key.sign("admin/x", b"body", to="127.0.0.1:1")) == b"body"
    assert main(["keygen", "--out", str(tmp_path)]) == 2  # an operator key is not replaced
