"""Issue 34, item 15, with real processes: a peer whose wall clock jumps 90 s ahead after it
joined a closed swarm (`--secret`) goes on exchanging and applying rounds, every peer's too;
the skew is said once on each side with the measured offset; the others' `/v1/status` shows it
as tolerated. It was listed alive while it silently dropped out (188 rounds started, 0 applied).

The clock is moved by a test hook that lives here, not in the package: a `sitecustomize` put
on the skewed child's PYTHONPATH offsets `time.time` by what a file says (read every 0.1 s),
as a machine whose clock was set wrong; its monotonic clock is untouched, as on a real one.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from tests.integration.peers import ENV, Peer
from tests.waiting import wait_for

pytestmark = [pytest.mark.slow, pytest.mark.timeout(240)]

SECRET = "skew"
CLOCK_VAR = "TEST_CLOCK_OFFSET_FILE"  # not SWARMNODE_: those must be settings
HOOK = f'''"""Test hook of tests/integration/test_clock_skew_processes.py: time.time is off by the
seconds in ${CLOCK_VAR}, re-read every 0.1 s."""
import os
import threading
import time

_path = os.environ.get("{CLOCK_VAR}")
if _path:
    _real, _sleep, _off = time.time, time.sleep, [0.0]

    def _read():
        try:
            with open(_path) as f:
                _off[0] = float(f.read().strip() or 0)
        except (OSError, ValueError):
            pass

    def _poll():
        while True:
            _read()
            _sleep(0.1)

    _read()
    threading.Thread(target=_poll, daemon=True).start()
    time.time = lambda: _real() + _off[0]
'''
ARGS = ("--secret", SECRET, "--steps", "0", "--slowdown", "5")


def skewed_env(tmp_path: Path) -> tuple[dict[str, str], Path]:
    hook = tmp_path / "clock_hook"
    hook.mkdir()
    (hook / "sitecustomize.py").write_text(HOOK)
    offset = tmp_path / "clock_offset"
    offset.write_text("0")
    path = os.pathsep.join(filter(None, (str(hook), ENV.get("PYTHONPATH"))))
    return {**ENV, "PYTHONPATH": path, CLOCK_VAR: str(offset)}, offset


def row_of(peer: Peer, other: Peer) -> dict[str, Any] | None:
    return next((m for m in peer.status()["members"] if m["peer_id"] == other.peer_id), None)


def applied(peer: Peer) -> int:
    return int(peer.status()["self"]["exchange"]["applied"])


def lines(peer: Peer, text: str) -> list[str]:
    log = (peer.dir / "log.txt").read_text(errors="replace")
    return [ln for ln in log.splitlines() if text in ln]


def test_a_peer_whose_clock_jumps_90_s_keeps_applying_rounds(tmp_path: Path) -> None:
    env, offset = skewed_env(tmp_path)
    a = Peer(tmp_path, "a", *ARGS).start(90)
    b = Peer(tmp_path, "b", *ARGS, "--join", a.addr)
    c = Peer(tmp_path, "c", *ARGS, "--join", a.addr, env=env)
    peers = [a, b, c]
    try:
        for p in (b, c):
            p.launch()
        for p in (b, c):
            p.wait_ready(90)

        def all_alive() -> bool:
            for p in peers:
                for q in peers:
                    if p is not q and (r := row_of(p, q)) is not None and r["state"] != "alive":
                        return False
                    if p is not q and r is None:
                        return False
            return True

        wait_for(all_alive, 60, "every peer to list the others alive")
        wait_for(lambda: all(applied(p) >= 3 for p in peers), 60, "rounds applied before")
        offset.write_text("90")  # c's clock jumps 90 s ahead
        wait_for(lambda: lines(c, "most likely off"), 30, "c to say its own clock is off")
        before = [applied(p) for p in peers]
        wait_for(
            lambda: all(applied(p) >= n + 5 for p, n in zip(peers, before, strict=True)),
            90,
            "five more rounds applied on every peer after the jump",
        )
        for p in (a, b):
            # a reading is taken when an envelope of c's arrives here: c may have sent its
            # rounds to the other peer since the jump, so wait for one (on a busy box, seconds)
            wait_for(
                lambda p=p: (r := row_of(p, c)) is not None and r["clock"] == "tolerated",
                60,
                f"{p.name} to measure c's clock",
            )
            row = row_of(p, c)
            assert row is not None and row["state"] == "alive", row
            assert 85 <= row["clock_s"] <= 95, row
            said = lines(p, f"the clock of {c.addr} is 90 s ahead")
            assert len(said) == 1 and "tolerated" in said[0], said  # once, not per request
        assert len(lines(c, "most likely off")) == 1
        assert len(lines(c, "s behind that of 127.0.0.1:")) == 2, lines(c, "behind")  # a, b
        for p in peers:  # nothing refused for the clock, nothing older than its window
            assert not lines(p, "refused until the clocks agree"), p.name
            assert not lines(p, "older than its latest"), p.name
    finally:
        for p in peers:
            p.stop()
