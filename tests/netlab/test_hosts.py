"""The three-machine quickstart's lines (docs/deploy.md; the README shows its first two), run
literally on three hosts (root only).

Each host is a network namespace with one address on a shared bridge (198.18.120.0/24, or the
next free /24 up to .129; no default route, as on an isolated LAN), its peer started with the
quickstart's command line word for word, its 10.0.0.5 and 10.0.0.6 read as the addresses of
hosts A and B. What the lines do not say comes from the environment, as a user's shell
or unit would set it: the secret, a ready file for the test, a pace that leaves the shared CPU
some room, a short gossip interval.

Checks: each peer advertises its host's own address (not 127.0.0.1, not 0.0.0.0), lists the two
others alive at their real addresses, exchanges models with each (a measured bulk transfer on
the link), and `--shard auto` gave B and C the two free thirds. Then C leaves with Ctrl-C (exit
0), A and B mark it left and log no WARNING for it; B is killed and A marks it dead, still
without a WARNING; B restarts at a new address and A takes it back there.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import signal
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from swarmnode.gossip.auth import read_token

from tests.netns import why_no_netns
from tests.waiting import wait_for

REPO = Path(__file__).resolve().parents[2]
TAG = f"hosts{os.getpid()}"
DOC_A, DOC_B = "10.0.0.5", "10.0.0.6"  # the quickstart's addresses of A and B
SECRET = "three-host-lab"  # the swarm's, given to every peer through the environment
PORT = 7070


def sh(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(args, capture_output=True, text=True, check=False)
    if check and proc.returncode != 0:
        raise RuntimeError(f"{' '.join(args)}: {proc.stderr.strip()}")
    return proc


_WHY = why_no_netns(TAG)
pytestmark = [
    pytest.mark.slow,
    pytest.mark.timeout(300),
    pytest.mark.skipif(_WHY is not None, reason=f"three-host lab: {_WHY}"),
]


def start_lines(page: str, heading: str) -> list[str]:
    """The `swarmnode start` lines of the section `heading` of `page`, up to the next heading."""
    text = (REPO / page).read_text()
    section = re.split(r"\n#{2,3} ", text.split(f"\n{heading}\n", 1)[1], maxsplit=1)[0]
    return [ln.strip() for ln in section.splitlines() if ln.strip().startswith("swarmnode start")]


def quickstart_lines() -> list[str]:
    """The quickstart's three lines (docs/deploy.md), of which the README shows the first two."""
    lines = start_lines("docs/deploy.md", "### 2. Start the peers")
    assert len(lines) == 3, lines
    assert start_lines("README.md", "## Two peers on two machines") == lines[:2]
    return lines


@dataclass
class Hosts:
    """A bridge in this namespace and one namespace ("host") per name, each with one address."""

    names: list[str]
    subnet: int = 0
    ips: dict[str, str] = field(default_factory=dict)

    @property
    def bridge(self) -> str:
        return f"{TAG}b"

    def ns(self, name: str) -> str:
        return f"{TAG}-{name}"

    def create(self) -> None:
        used = set(re.findall(r"inet 198\.18\.(\d+)\.", sh("ip", "-o", "addr").stdout))
        self.subnet = next(s for s in range(120, 130) if str(s) not in used)
        sh("ip", "link", "add", self.bridge, "type", "bridge")
        sh("ip", "addr", "add", f"198.18.{self.subnet}.1/24", "dev", self.bridge)
        sh("ip", "link", "set", self.bridge, "up")
        for i, name in enumerate(self.names):
            ns, host_end, ns_end = self.ns(name), f"{TAG}h{i}", f"{TAG}n{i}"
            sh("ip", "netns", "add", ns)
            sh("ip", "link", "add", host_end, "type", "veth", "peer", "name", ns_end)
            sh("ip", "link", "set", ns_end, "netns", ns)
            sh("ip", "link", "set", host_end, "master", self.bridge)
            sh("ip", "link", "set", host_end, "up")
            sh("ip", "netns", "exec", ns, "ip", "link", "set", "lo", "up")
            sh("ip", "netns", "exec", ns, "ip", "link", "set", ns_end, "up")
            self.set_ip(name, i + 2)

    def set_ip(self, name: str, last: int) -> None:
        """Give host `name` the address 198.18.S.`last` (replacing the one it had)."""
        ns, dev = self.ns(name), f"{TAG}n{self.names.index(name)}"
        if name in self.ips:
            sh("ip", "netns", "exec", ns, "ip", "addr", "del", f"{self.ips[name]}/24", "dev", dev)
        self.ips[name] = f"198.18.{self.subnet}.{last}"
        sh("ip", "netns", "exec", ns, "ip", "addr", "add", f"{self.ips[name]}/24", "dev", dev)

    def teardown(self) -> None:
        for name in self.names:
            ns = self.ns(name)
            for pid in sh("ip", "netns", "pids", ns, check=False).stdout.split():
                sh("kill", "-9", pid, check=False)  # our own peers, if a test left one
            sh("ip", "netns", "del", ns, check=False)
        for i in range(len(self.names)):
            sh("ip", "link", "del", f"{TAG}h{i}", check=False)
        sh("ip", "link", "del", self.bridge, check=False)


@dataclass
class HostPeer:
    name: str
    proc: subprocess.Popen[bytes]
    log: Path
    ready: Path
    addr: str = ""

    def status(self) -> dict[str, Any]:
        # The test reads from outside the peers' hosts, as an operator does: a closed swarm
        # shows its figures to the bearer of its read token (docs/security.md), as `swarmnode
        # status --secret` sends it
        headers = {"Authorization": f"Bearer {read_token(SECRET)}"}
        request = urllib.request.Request(f"http://{self.addr}/v1/status", headers=headers)
        with urllib.request.urlopen(request, timeout=3) as r:
            return json.loads(r.read())

    def members(self) -> dict[str, dict[str, Any]]:
        return {m["name"]: m for m in self.status()["members"]}

    def warnings(self) -> list[str]:
        """WARNING lines, but those about the shared box's load (a stalled event loop)."""
        lines = self.log.read_text().splitlines()
        return [ln for ln in lines if " WARNING " in ln and "event loop stalled" not in ln]


@pytest.fixture
def hosts() -> Iterator[Hosts]:
    net = Hosts(["a", "b", "c"])
    try:
        net.create()
        yield net
    finally:
        net.teardown()
        left = sh("ip", "netns", "list").stdout
        assert TAG not in left, f"namespaces left behind: {left}"


def start(net: Hosts, tmp: Path, line: str, name: str, peers: list[HostPeer]) -> HostPeer:
    """Run one quickstart line on host `name`, as typed (its addresses made the hosts')."""
    line = line.replace(DOC_A, net.ips["a"]).replace(DOC_B, net.ips["b"])
    argv = shlex.split(line)
    assert argv[0] == "swarmnode"
    d = tmp / name
    d.mkdir(exist_ok=True)
    ready, log = d / "ready.json", d / "peer.log"
    ready.unlink(missing_ok=True)
    env = dict(
        os.environ,
        PYTHONUNBUFFERED="1",
        SWARMNODE_SECRET=SECRET,
        SWARMNODE_READY_FILE=str(ready),
        SWARMNODE_CHECKPOINT_DIR=str(d / "ckpt"),  # a restart keeps its id
        SWARMNODE_SLOWDOWN="10",
        SWARMNODE_GOSSIP_INTERVAL="0.2",
    )
    cmd = ["ip", "netns", "exec", net.ns(name), sys.executable, "-m", "swarmnode", *argv[1:]]
    with open(log, "ab") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env=env, cwd=d)
    peer = HostPeer(name, proc, log, ready)
    peers.append(peer)

    def up() -> bool:
        assert proc.poll() is None, f"{name} exited {proc.returncode}: {log.read_text()[-2000:]}"
        return ready.exists()

    wait_for(up, 90, f"peer {name} ready")
    peer.addr = json.loads(ready.read_text())["addr"]
    return peer


def test_the_quickstarts_three_machine_lines_on_three_hosts(hosts: Hosts, tmp_path: Path) -> None:
    peers: list[HostPeer] = []
    try:
        run(hosts, tmp_path, peers)
    finally:
        for p in peers:
            if p.proc.poll() is None:
                p.proc.kill()
                p.proc.wait(10)


def run(net: Hosts, tmp: Path, peers: list[HostPeer]) -> None:
    line_a, line_b, line_c = quickstart_lines()
    a = start(net, tmp, line_a, "a", peers)
    b = start(net, tmp, line_b, "b", peers)  # joins through A
    c = start(net, tmp, line_c, "c", peers)  # joins through B
    trio = [a, b, c]
    for p in trio:  # each advertises its host's own address, on the quickstart's port
        assert p.addr == f"{net.ips[p.name]}:{PORT}", (p.name, p.addr)
        banner = f"listening on {p.addr} ("
        wait_for(lambda p=p, b=banner: b in p.log.read_text(), 10, f"{p.name}'s banner")
    assert [p.status()["self"]["shard"] for p in trio] == ["0/3", "1/3", "2/3"]

    def everyone_exchanges() -> bool:
        for p in trio:
            view = p.members()
            links = {link["addr"]: link for link in p.status()["self"]["links"]}
            for o in trio:
                if o is p:
                    continue
                if view.get(o.name, {}).get("state") != "alive" or view[o.name]["addr"] != o.addr:
                    return False
                if links.get(o.addr, {}).get("mbit_s") is None:  # no model moved yet
                    return False
        return True

    wait_for(everyone_exchanges, 90, "each peer to list the others at their addresses and exchange")

    c.proc.send_signal(signal.SIGINT)  # Ctrl-C: a clean leave
    assert c.proc.wait(15) == 0, c.log.read_text()[-2000:]
    for p in (a, b):
        wait_for(lambda p=p: p.members()["c"]["state"] == "left", 15, f"{p.name}: c left")
    # the flood came several times a second: let the survivors gossip for 20 more rounds
    beat = a.members()["b"]["heartbeat"]
    wait_for(lambda: a.members()["b"]["heartbeat"] >= beat + 20, 30, "20 rounds after the leave")
    for p in (a, b):
        assert p.warnings() == [], f"{p.name} logged a warning after a clean leave"

    b.proc.kill()
    b.proc.wait(10)
    wait_for(lambda: a.members()["b"]["state"] == "dead", 30, "a to mark b dead")
    assert a.warnings() == [], "a death is logged at INFO, not as a warning"

    # B comes back at another address (a restart at a new IP), with its key: the same peer
    old_id = a.members()["b"]["peer_id"]
    net.set_ip("b", 13)
    b2 = start(net, tmp, line_b, "b", peers)
    assert b2.addr == f"{net.ips['b']}:{PORT}"

    def back() -> bool:
        m = a.members()["b"]
        link = {x["addr"]: x for x in a.status()["self"]["links"]}.get(b2.addr, {})
        return m["state"] == "alive" and m["addr"] == b2.addr and link.get("mbit_s") is not None

    wait_for(back, 60, "a to take b back at its new address and exchange with it")
    assert a.members()["b"]["peer_id"] == old_id
    assert a.warnings() == []
