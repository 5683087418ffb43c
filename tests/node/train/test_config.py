"""NodeConfig.validate(): the checks that must fail at start rather than mid-run."""

from __future__ import annotations

from pathlib import Path

import pytest
from swarmnode.node.train.config import NodeConfig
from swarmnode.node.train.errors import ConfigError


@pytest.mark.parametrize("seed", [-1, -(2**40), 1.5, "3"])
def test_seed_must_be_a_non_negative_int(seed: object) -> None:
    with pytest.raises(ConfigError, match="`seed` must be an integer >= 0"):
        NodeConfig(seed=seed).validate()  # type: ignore[arg-type]


def test_large_seed_is_fine() -> None:
    assert NodeConfig(seed=2**40).validate().seed == 2**40


def test_summary_json_in_a_missing_but_creatable_dir_is_fine(tmp_path: Path) -> None:
    NodeConfig(summary_json=tmp_path / "a" / "b" / "s.json").validate()  # created when written
    assert not (tmp_path / "a").exists()  # validation creates nothing


@pytest.mark.parametrize(
    ("make", "needle"),
    [
        (lambda t: t / "afile" / "s.json", "is not a directory"),
        (lambda t: t / "afile" / "deeper" / "s.json", "is not a directory"),
        (lambda t: t, "is a directory, not a file path"),
    ],
)
def test_bad_summary_json_path(tmp_path: Path, make, needle: str) -> None:
    (tmp_path / "afile").write_text("x")
    path = make(tmp_path)
    with pytest.raises(ConfigError, match=needle) as info:
        NodeConfig(summary_json=str(path)).validate()
    assert "`summary_json`" in str(info.value) and "\n" not in str(info.value)


def test_summary_json_in_an_unwritable_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(
        "swarmnode.node.train.config.os.access", lambda path, mode: str(path) != str(tmp_path)
    )
    with pytest.raises(ConfigError, match=r"directory .* is not writable"):
        NodeConfig(summary_json=tmp_path / "new" / "s.json").validate()


def test_checkpoint_dir_that_is_a_file(tmp_path: Path) -> None:
    f = tmp_path / "afile"
    f.write_text("x")
    with pytest.raises(ConfigError, match=r"`checkpoint_dir` .* exists and is not a directory"):
        NodeConfig(checkpoint_dir=f).validate()
