"""Sybils from 63 addresses of one /24 (issue 22), in a network namespace of this test's own
(root only; CI runs as root; skipped cleanly elsewhere).

The namespace's loopback holds 198.18.130.0/24 (RFC 2544 space, no other test's /24), so the
attacker sends from real distinct addresses of one prefix, and nothing leaves the namespace. The
whole chaos run (`swarmnode chaos scripts/scenarios/hostile-sybils-prefix-short.toml`, its
control swarm included) runs inside it: the per-prefix cap must bound what the attacker lists
(128, not 63 x 32), and the honest rounds must hold against the control's.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.netns import why_no_netns

ROOT = Path(__file__).resolve().parents[3]
SCENARIO = ROOT / "scripts" / "scenarios" / "hostile-sybils-prefix-short.toml"
NET = "198.18.130.0/24"


_WHY = why_no_netns(f"sybnet{os.getpid()}")
pytestmark = [
    pytest.mark.slow,
    pytest.mark.flood,
    pytest.mark.timeout(240),
    pytest.mark.skipif(_WHY is not None, reason=f"sybil namespace: {_WHY}"),
]


def _ip(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["ip", *args], capture_output=True, text=True, check=False)


@pytest.fixture
def namespace() -> Iterator[str]:
    name = f"hostile{os.getpid()}"
    made = _ip("netns", "add", name)
    if made.returncode != 0:
        pytest.skip(f"cannot create a network namespace: {made.stderr.strip()}")
    try:
        for step in (("link", "set", "lo", "up"), ("route", "add", "local", NET, "dev", "lo")):
            done = _ip("-n", name, *step)
            assert done.returncode == 0, done.stderr
        yield name
    finally:
        for pid in _ip("netns", "pids", name).stdout.split():  # nothing of ours outlives it
            subprocess.run(["kill", "-9", pid], check=False)
        _ip("netns", "del", name)


def test_sybils_from_one_prefix_are_capped_and_cost_no_more_than_a_slow_peer(
    namespace: str, tmp_path: Path
) -> None:
    report_dir = tmp_path / "run"
    argv = [sys.executable, "-m", "swarmnode", "chaos", str(SCENARIO), "--report", str(report_dir)]
    run = subprocess.run(
        ["ip", "netns", "exec", namespace, *argv, "--quiet", "--no-plot"],
        capture_output=True,
        text=True,
        timeout=200,
        check=False,
    )
    report = json.loads((report_dir / "report.json").read_text())
    verdicts = "\n".join(f"{a['status']}: {a['description']}" for a in report["assertions"])
    assert report["result"] == "pass", f"{verdicts}\n{run.stdout[-3000:]}\n{run.stderr[-2000:]}"
    assert run.returncode == 0
    (flood,) = report["hostile"]
    assert flood["sources"] == 63 and flood["held"] >= 1
    # it got its prefix's quota (the attack was on), and no more than that
    assert 64 <= flood["listed_max"] <= 128
