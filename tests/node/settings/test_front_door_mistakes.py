"""Mistakes at the front door fail in one line, exit 2, and name the fix (issue 34, items 5
and 17): a misspelt `SWARMNODE_*` variable, a misspelt verb or choice, an unknown `--data`, and
an empty secret (which would otherwise start an open swarm)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from swarmnode.node.cli.command import main
from swarmnode.node.settings import OTHER_VARS, PeerConfig, start_options
from swarmnode.node.train.errors import ConfigError

pytestmark = pytest.mark.timeout(30)

REPO = Path(__file__).resolve().parents[3]


def _error_line(capsys: pytest.CaptureFixture[str], argv: list[str]) -> str:
    """`swarmnode ARGV`'s stderr, which must be one line, and its exit code 2."""
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err, err
    return err


def test_a_misspelt_variable_names_the_nearest_setting(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SWARMNODE_SYNC_EVRY", "3")
    err = _error_line(capsys, ["start", "--steps", "1"])
    assert err == (
        "swarmnode start: error: $SWARMNODE_SYNC_EVRY: no such setting; "
        "did you mean '$SWARMNODE_SYNC_EVERY'?"
    )


def test_the_projects_own_variables_are_known() -> None:
    """Every `SWARMNODE_*` name the code reads is an option's variable or in OTHER_VARS."""
    options = start_options()
    used: set[str] = set()
    for room in ("node", "gossip", "kernels", "fault", "scripts"):
        for path in (REPO / room).rglob("*.py"):
            used |= set(re.findall(r"[\"'](SWARMNODE_[A-Z0-9_]+)[\"']", path.read_text()))
    assert used, "the scan found nothing: the pattern is wrong"
    unknown = used - {o.env for o in options.options} - set(OTHER_VARS)
    assert not unknown, f"read by the code but refused by `start`: {sorted(unknown)}"
    env = {name: "x" for name in OTHER_VARS} | {"SWARMNODE_STEPS": "1", "HOME": "/"}
    options.check_env(env, OTHER_VARS)  # raises nothing


def test_a_variable_far_from_every_setting_is_still_refused() -> None:
    with pytest.raises(ConfigError, match=r"^\$SWARMNODE_QQQQQQQQQQ: no such setting$"):
        start_options().check_env({"SWARMNODE_QQQQQQQQQQ": "1"}, OTHER_VARS)


def test_a_misspelt_verb_gets_a_did_you_mean(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["strat"])
    assert exit_.value.code == 2
    err = capsys.readouterr().err.strip()
    assert "invalid choice: 'strat'" in err and "did you mean 'start'?" in err, err


def test_a_choice_options_bad_value_gets_a_did_you_mean(
    capsys: pytest.CaptureFixture[str],
) -> None:
    err = _error_line(capsys, ["start", "--exchange", "robst"])
    assert err == (
        "swarmnode start: error: --exchange: 'robst' is not one of average, robust; "
        "did you mean 'robust'?"
    )


def test_an_unknown_data_lists_every_form(capsys: pytest.CaptureFixture[str]) -> None:
    err = _error_line(capsys, ["start", "--data", "no-such-set", "--steps", "1"])
    for form in ("'digits'", "synthetic:", "signal:", ".npz", "folder", "MODULE:FUNCTION"):
        assert form in err, (form, err)


@pytest.mark.parametrize(
    ("argv", "env", "named"),
    [
        (["--secret", ""], {}, "--secret"),
        ([], {"SWARMNODE_SECRET": ""}, "$SWARMNODE_SECRET"),
        ([], {"SWARMNODE_SECRET": "  "}, "$SWARMNODE_SECRET"),
        (["--config", "FILE"], {}, "secret"),
    ],
)
def test_an_empty_secret_is_refused(
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    argv: list[str],
    env: dict[str, str],
    named: str,
) -> None:
    monkeypatch.delenv("SWARMNODE_SECRET", raising=False)
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    file = tmp_path / "peer.toml"
    file.write_text('secret = ""\n')
    argv = [str(file) if a == "FILE" else a for a in argv]
    err = _error_line(capsys, ["start", *argv, "--steps", "1"])
    assert err.startswith(f"swarmnode start: error: {named} is empty: "), err
    assert "open swarm" in err


def test_an_empty_secret_is_refused_from_python() -> None:
    with pytest.raises(ConfigError, match="`secret` is empty"):
        PeerConfig(secret="").validate()
    assert PeerConfig(secret=None).validate().admission_mode == "open"


def test_an_empty_secret_in_the_shell_of_a_chaos_run_is_refused(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The runner took `SWARMNODE_SECRET=` for no secret: its peers then formed an open swarm."""
    monkeypatch.setenv("SWARMNODE_SECRET", "")
    err = _error_line(capsys, ["demo", "--quick", "--report", str(tmp_path / "run")])
    assert (
        err
        == "swarmnode demo: error: $SWARMNODE_SECRET is empty: set the swarm's secret, or unset it"
    )
    assert not (tmp_path / "run").exists()  # refused before any peer started
