"""`swarmnode demo` as a new user sees it (issue 34, item 10): its own lines say `demo:`, the
page's line says how long the page lives, `--keep` keeps the swarm and its page up after the
timeline until Ctrl-C, and the run ends with the next step."""

from __future__ import annotations

import io
import re
import signal
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest
from swarmnode.node.cli.cmd_demo import NEXT_STEP, DemoVoice

from tests.waiting import wait_for

REPO = Path(__file__).resolve().parents[3]


@pytest.mark.timeout(10)
def test_the_runners_lines_speak_as_the_demo() -> None:
    out = io.StringIO()
    voice = DemoVoice(out, 40, keep=False)
    for line in ("chaos: demo: 4 peers learn", "chaos: watch the swarm live at http://h:1/",
                 "t=   1.0s  a 30 4.5%", "chaos: t=10.0s d joins ready", "chaos: report in r/"):  # fmt: skip
        print(line, file=voice)
    assert out.getvalue().splitlines() == [
        "demo: 4 peers learn",
        "demo: watch the swarm live at http://h:1/ (until the demo ends at t=40 s; --keep keeps "
        "it up until Ctrl-C)",
        "t=   1.0s  a 30 4.5%",
        "demo: t=10.0s d joins ready",
        "demo: report in r/",
    ]


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_demo_keep_serves_the_page_after_the_timeline_until_ctrl_c(tmp_path: Path) -> None:
    log = tmp_path / "out.txt"
    argv = [sys.executable, "-m", "swarmnode", "demo", "--quick", "--keep", "--report",
            str(tmp_path / "run")]  # fmt: skip
    with log.open("w") as sink:
        proc = subprocess.Popen(argv, cwd=REPO, stdout=sink, stderr=subprocess.DEVNULL)
    try:
        wait_for(lambda: "Ctrl-C stops it" in log.read_text() or proc.poll() is not None, 90,
                 "the end of the demo's timeline")  # fmt: skip
        assert proc.poll() is None, log.read_text()[-3000:]
        page = re.findall(r"its page at (http://[0-9.:]+/)", log.read_text())[-1]
        with urllib.request.urlopen(page, timeout=10) as resp:  # the timeline is over: still up
            assert resp.status == 200
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=60) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    out = log.read_text()
    assert not [ln for ln in out.splitlines() if ln.startswith("chaos:")], out
    assert "(kept up until Ctrl-C)" in out and "result: PASS" in out
    assert out.rstrip().splitlines()[-1] == NEXT_STEP
