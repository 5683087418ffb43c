"""Whether a test may build network namespaces here (root, iproute2, a namespace it can make):
the one skip reason of every test that runs peers on their own addresses (198.18.0.0/15)."""

from __future__ import annotations

import os
import shutil
import subprocess


def why_no_netns(tag: str) -> str | None:
    """None where this process can make namespaces; else why not (a skip reason). `tag`
    names the probe namespace, so that concurrent test files do not collide."""
    if os.geteuid() != 0:
        return "needs root (network namespaces, veth pairs)"
    if shutil.which("ip") is None:
        return "needs the `ip` command (iproute2)"
    probe = f"{tag}probe"
    made = subprocess.run(["ip", "netns", "add", probe], capture_output=True, text=True)
    if made.returncode != 0:
        return f"cannot create a network namespace: {made.stderr.strip()}"
    subprocess.run(["ip", "netns", "del", probe], capture_output=True, text=True)
    return None
