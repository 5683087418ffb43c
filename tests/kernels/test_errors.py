"""The shared error helpers of kernels/errors.py: one "did you mean" for the whole project."""

from __future__ import annotations

from pathlib import Path

import pytest
from swarmnode.kernels.errors import did_you_mean

pytestmark = pytest.mark.timeout(30)

ROOT = Path(__file__).resolve().parents[2]


def test_the_nearest_word_is_offered_quoted_and_a_far_one_is_not() -> None:
    assert did_you_mean("sync_evry", ["lr", "sync_every"]) == "; did you mean 'sync_every'?"
    assert did_you_mean("SYNC_EVRY", ["SYNC_EVERY"], prefix="$SN_") == (
        "; did you mean '$SN_SYNC_EVERY'?"
    )
    assert did_you_mean("zzz", ["sync_every"]) == ""
    assert did_you_mean("x", []) == ""


def test_no_module_writes_its_own_did_you_mean() -> None:
    # one wording everywhere: a second copy drifts (it had: quoted, !r, bare, $-prefixed)
    own = ROOT / "kernels" / "errors.py"
    copies = [
        str(p.relative_to(ROOT))
        for folder in ("kernels", "gossip", "node", "fault", "scripts")
        for p in (ROOT / folder).rglob("*.py")
        if ".venv" not in p.parts and p != own and "did you mean" in p.read_text()
    ]
    assert not copies, f"write the hint with kernels.errors.did_you_mean: {copies}"
