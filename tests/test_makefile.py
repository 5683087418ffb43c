"""The Makefile's two set-ups (issue 34, item 10): `make demo` installs the package and its plot
library only, `make test` the whole test toolchain, each behind its own stamp."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[1]

pytestmark = [
    pytest.mark.slow,  # it runs make
    pytest.mark.timeout(30),
    pytest.mark.skipif(shutil.which("make") is None, reason="no make on this machine"),
]


def _dry_run(target: str, venv: Path) -> list[str]:
    """What `make TARGET` would run on a fresh clone (no venv yet)."""
    # run under `make test` too: a make inside make prints "Entering/Leaving directory" lines
    # unless told not to, and inherits the outer one's flags
    env = {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL")}
    argv = ["make", "--no-print-directory", "-n", target, f"VENV={venv}"]
    done = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, check=True, env=env)
    return done.stdout.splitlines()


def test_make_demo_installs_only_the_package_and_its_plot_library(tmp_path: Path) -> None:
    lines = _dry_run("demo", tmp_path / "venv")
    installs = [ln for ln in lines if " install " in ln and "--upgrade pip" not in ln]
    assert installs == [f"{tmp_path / 'venv'}/bin/pip install -q -e '.[plot]'"], lines
    assert lines[-1] == f"{tmp_path / 'venv'}/bin/swarmnode demo"


def test_make_test_installs_the_toolchain_which_holds_the_demos_too(tmp_path: Path) -> None:
    lines = _dry_run("test", tmp_path / "venv")
    assert f"{tmp_path / 'venv'}/bin/pip install -q -e '.[test]'" in lines, lines
    # the test stamp marks the demo's done too: true only while [test] holds all of [plot]
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    extras = extras["optional-dependencies"]
    assert set(extras["plot"]) <= set(extras["test"])
