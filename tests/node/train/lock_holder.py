"""Another process holding a checkpoint dir's lock, for the one-process-per-dir tests."""

from __future__ import annotations

import contextlib
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]
HOLD_LOCK = """
import sys
from swarmnode.node.train.checkpoint import lock_checkpoint_dir
lock_checkpoint_dir(sys.argv[1])
print("locked", flush=True)
sys.stdin.read()  # hold it until the test closes our stdin
"""


@contextlib.contextmanager
def lock_held_elsewhere(directory: Path) -> Iterator[int]:
    """A child process locks `directory` for the block; yields its pid. The lock is gone after
    the block (the child has exited: the kernel drops its flock)."""
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD_LOCK, str(directory)],
        cwd=REPO, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert holder.stdout is not None and holder.stdin is not None
        assert holder.stdout.readline().strip() == "locked"
        yield holder.pid
    finally:
        if holder.stdin is not None:
            holder.stdin.close()
        holder.wait(timeout=30)
