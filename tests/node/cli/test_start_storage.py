"""`swarmnode start` on storage that lets it down (issue 34, item 16): each case is one line
that says what happened and what the peer does about it, never a traceback."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from swarmnode.gossip.auth import KEY_FILE
from swarmnode.node.cli.command import main
from swarmnode.node.train import checkpoint as ck

pytestmark = pytest.mark.timeout(90)

START = ["start", "--listen", "127.0.0.1:0", "--model", "mlp:8", "--device", "cpu"]


def _start(ckdir: Path, steps: int, tmp_path: Path) -> dict:
    summary = tmp_path / "summary.json"
    argv = [*START, "--steps", str(steps), "--checkpoint-dir", str(ckdir), "--checkpoint-every",
            "10", "--summary-json", str(summary)]  # fmt: skip
    assert main(argv) == 0
    return json.loads(summary.read_text())


def _warnings(capsys: pytest.CaptureFixture[str]) -> list[str]:
    """The messages of the WARNING (and worse) lines the CLI's log handler wrote."""
    lines = capsys.readouterr().err.splitlines()
    return [ln.split(": ", 1)[1] for ln in lines if ln.split()[2:3] in (["WARNING"], ["ERROR"])]


def test_a_full_disk_before_the_first_write_is_one_line_and_exit_2(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    real_open = open

    def full(path: object, mode: str = "r", *args: object) -> object:
        fh = real_open(path, mode, *args)  # the code under test closes it
        if "b" in mode and "+" in mode:  # the lock file, written first of all

            def no_space(data: bytes) -> int:
                raise OSError(28, "No space left on device")

            fh.write = no_space  # type: ignore[method-assign]
        return fh

    monkeypatch.setattr(ck, "open", full, raising=False)
    assert main([*START, "--steps", "5", "--checkpoint-dir", str(tmp_path / "ck")]) == 2
    err = capsys.readouterr().err.strip()
    assert err == (
        f"swarmnode start: error: cannot use checkpoint dir {tmp_path / 'ck'}: No space left on "
        "device (free some space, or give another --checkpoint-dir)"
    )


def test_every_checkpoint_damaged_is_one_warning_and_a_start_from_step_0(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ckdir = tmp_path / "ck"
    _start(ckdir, 20, tmp_path)
    for _, path in ck.list_checkpoints(ckdir):
        path.write_bytes(path.read_bytes()[:-10])
    capsys.readouterr()
    summary = _start(ckdir, 5, tmp_path)
    assert summary["resumed_from_step"] is None and summary["steps"] == 5
    [said] = _warnings(capsys)
    assert said.startswith(f"all 2 checkpoints in {ckdir} are damaged (newest: ckpt-"), said
    assert "starting from step 0" in said


def test_a_lost_peer_key_beside_checkpoints_says_a_new_identity_was_made(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ckdir = tmp_path / "ck"
    first = _start(ckdir, 10, tmp_path)
    capsys.readouterr()
    _start(ckdir, 12, tmp_path)
    assert not _warnings(capsys)  # a plain restart: the same identity, nothing to say
    (ckdir / KEY_FILE).unlink()
    second = _start(ckdir, 14, tmp_path)
    assert second["peer_id"] != first["peer_id"] and second["resumed_from_step"] == 12
    [said] = _warnings(capsys)
    assert said.startswith(f"no {KEY_FILE} in {ckdir}, which holds an earlier run's state: "
                           f"made a new identity {second['peer_id']} (was {first['peer_id']})")  # fmt: skip
    assert "--trust" in said
