"""Packaging: the wheel installs `swarmnode` and nothing else at the top level of site-packages.

The folders `kernels/`, `gossip/`, `node/` and `fault/` stay at the repository's top level, where
the user put them; pyproject.toml maps them under `swarmnode.*`. Names such as `kernels` and
`node` belong to other PyPI projects, so installing ours must not shadow them.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from tests.build_env import extension_expected

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[1]
FOLDERS = ("kernels", "gossip", "node", "fault")
# a .so built in place by an editable install must not reach the wheel by copy: it is built there
IGNORE = shutil.ignore_patterns("__pycache__", "*.pyc", "*.so", "*.pyd")


def _declared() -> tuple[dict[str, str], list[str]]:
    setup = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    return setup["package-dir"], setup["packages"]


def _package_folders() -> set[str]:
    """Every folder Python could import (with an __init__.py, or data only, such as
    node/web/static: setuptools warns about any it is not told of), as its name under
    `swarmnode`."""
    names = {"swarmnode"}
    for folder in FOLDERS:
        for d in [ROOT / folder, *(ROOT / folder).rglob("*")]:
            if d.is_dir() and d.name != "__pycache__" and any(f.is_file() for f in d.iterdir()):
                names.add("swarmnode." + ".".join(d.relative_to(ROOT).parts))
    return names


@pytest.mark.timeout(30)
def test_every_package_folder_is_declared_under_swarmnode():
    package_dir, packages = _declared()
    assert set(packages) == _package_folders()
    assert {f"swarmnode.{f}": f for f in FOLDERS}.items() <= package_dir.items()


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_the_wheel_holds_only_the_swarmnode_namespace(tmp_path):
    # Built from a copy: setuptools writes build/ and *.egg-info beside the sources it builds.
    src = tmp_path / "src"
    src.mkdir()
    for name in ("pyproject.toml", "setup.py", "README.md", "swarmnode", *FOLDERS):
        copy = shutil.copytree if (ROOT / name).is_dir() else shutil.copy2
        copy(ROOT / name, src / name, **({"ignore": IGNORE} if copy is shutil.copytree else {}))
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(tmp_path), str(src)],
        check=True,
        capture_output=True,
        timeout=280,
    )
    (wheel,) = tmp_path.glob("swarmnode-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    top = {n.split("/")[0] for n in names if not n.split("/")[0].endswith(".dist-info")}
    assert top == {"swarmnode"}
    for must in (
        "swarmnode/__main__.py",
        "swarmnode/node/cli/command.py",
        "swarmnode/node/train/data/digits.npz",
        "swarmnode/fault/chaos/runner.py",
        "swarmnode/node/web/static/index.html",  # the page ships in the wheel: no CDN, no build
        "swarmnode/node/web/static/app.js",
        "swarmnode/node/web/static/vendor/uPlot.iife.min.js",
        "swarmnode/node/web/static/vendor/uPlot.LICENSE",
    ):
        assert must in names
    if extension_expected():  # the optional int8 kernel: compiled into the wheel where it can be
        assert any(re.fullmatch(r"swarmnode/kernels/_int8\..+\.(so|pyd)", n) for n in names)
    entry = next(n for n in names if n.endswith(".dist-info/entry_points.txt"))
    assert "swarmnode = swarmnode.node.cli:main" in zipfile.ZipFile(wheel).read(entry).decode()
