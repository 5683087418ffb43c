"""The device check stays ready (scripts/gpu_check.sh, scripts/gpu_wheels.sh): it parses, every
script and path it names exists, and every wheel it carries is one this project depends on and
has installed here (its version is the one downloaded). It cannot run here: no GPU."""

from __future__ import annotations

import importlib.metadata
import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CHECK = ROOT / "scripts" / "gpu_check.sh"
WHEELS = ROOT / "scripts" / "gpu_wheels.sh"

pytestmark = pytest.mark.timeout(30)


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")
@pytest.mark.parametrize("script", [CHECK, WHEELS], ids=lambda p: p.name)
def test_the_device_scripts_parse(script: Path) -> None:
    subprocess.run(["bash", "-n", str(script)], check=True)


def test_every_script_and_room_the_check_names_exists() -> None:
    text = CHECK.read_text()
    for path in re.findall(r"scripts/[\w/]+\.py", text):
        assert (ROOT / path).is_file(), path
    rooms = re.search(r"for room in ([\w ]+); do", text)
    assert rooms is not None
    for room in rooms.group(1).split():
        assert (ROOT / room / "__init__.py").is_file(), room


def test_every_carried_wheel_is_installed_here() -> None:
    names = re.search(r"for name in ([\w -]+); do", WHEELS.read_text())
    assert names is not None
    for name in names.group(1).split():
        assert importlib.metadata.version(name)  # raises PackageNotFoundError when missing
