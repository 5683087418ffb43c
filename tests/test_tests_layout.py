"""The tests mirror the rooms: each test of gossip/, node/ and fault/ sits in the folder of the
room it tests (tests/gossip/exchange/ for gossip/exchange/), so that a room's tests are found
where the room is, and a new room gets a folder of its own."""

from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
MIRRORED = ("gossip", "node", "fault")

pytestmark = pytest.mark.timeout(30)


@pytest.mark.parametrize("package", MIRRORED)
def test_no_test_file_sits_beside_the_rooms(package: str) -> None:
    loose = sorted(p.name for p in (ROOT / "tests" / package).glob("*.py"))
    assert not loose, f"tests/{package}/: {loose} belong in the folder of the room they test"


@pytest.mark.parametrize("package", MIRRORED)
def test_each_test_folder_is_a_room(package: str) -> None:
    folders = [p for p in (ROOT / "tests" / package).iterdir() if p.is_dir()]
    rooms = {p.name for p in (ROOT / package).iterdir() if (p / "__init__.py").exists()}
    stray = sorted(p.name for p in folders if p.name not in rooms and p.name != "__pycache__")
    assert not stray, f"tests/{package}/{stray}: no such room in {package}/"
