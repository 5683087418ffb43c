"""The lab's network: one Linux bridge, one namespace per peer joined to it by a veth pair, each
link shaped by token-bucket filters in both directions. Everything is named with the prefix
`snl<pid>` (the lab process's id), so a later run (or `--cleanup`) finds and removes what a
crashed lab left behind: names whose pid no longer runs are stale.

Addresses come from 198.18.0.0/15 (RFC 2544 benchmarking space) only: the bridge holds
198.18.S.1/24 on the host (so the lab can poll each peer's /v1/status), peer i gets 198.18.S.(i+2).
No namespace has a default route: a peer reaches the bridge's /24 and nothing else.
"""

from __future__ import annotations

import ipaddress
import os
import re
import subprocess
from dataclasses import dataclass, field

PREFIX = "snl"
LAB_NET = ipaddress.ip_network("198.18.0.0/15")
_RATE_RE = re.compile(r"^(\d+(?:\.\d+)?)(kbit|mbit|gbit)$")
_UNITS = {"kbit": 1e3, "mbit": 1e6, "gbit": 1e9}


class NetLabError(RuntimeError):
    """A lab command failed or a lab option is malformed."""


def sh(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(args, capture_output=True, text=True, check=False)
    if check and proc.returncode != 0:
        raise NetLabError(f"{' '.join(args)}: {proc.stderr.strip() or proc.stdout.strip()}")
    return proc


def parse_rate(text: str) -> float:
    """'100mbit' -> 1e8 bits/s; raises NetLabError on anything else."""
    m = _RATE_RE.match(text.strip().lower())
    if not m:
        raise NetLabError(f"bad link rate {text!r} (expected e.g. 1gbit, 100mbit, 500kbit)")
    return float(m.group(1)) * _UNITS[m.group(2)]


def can_use_namespaces() -> str | None:
    """None when this process may create namespaces and links; else why not (for test skips)."""
    if os.geteuid() != 0:
        return "needs root (network namespaces, veth pairs, tc)"
    for tool in ("ip", "tc"):
        if sh("which", tool, check=False).returncode != 0:
            return f"needs the `{tool}` command (iproute2)"
    probe = f"{PREFIX}{os.getpid()}probe"
    made = sh("ip", "netns", "add", probe, check=False)
    if made.returncode != 0:
        return f"cannot create a network namespace: {made.stderr.strip()}"
    sh("ip", "netns", "del", probe, check=False)
    return None


@dataclass
class Link:
    """Peer i's namespace and veth ends, its address and its shaped rate."""

    index: int
    ns: str
    host_end: str
    ns_end: str
    ip: str
    rate_bps: float


@dataclass
class LabNet:
    """Creates and tears down the bridge, namespaces and links of one lab run."""

    rates: list[float]
    tag: str = field(default_factory=lambda: f"{PREFIX}{os.getpid()}")
    subnet: int = -1
    links: list[Link] = field(default_factory=list)
    up: bool = False

    @property
    def bridge(self) -> str:
        return f"{self.tag}b"

    @property
    def host_ip(self) -> str:
        return f"198.18.{self.subnet}.1"

    def create(self) -> None:
        cleanup_stale()
        self.subnet = _free_subnet()
        self.up = True  # from here on, teardown has something to remove
        sh("ip", "link", "add", self.bridge, "type", "bridge")
        sh("ip", "addr", "add", f"{self.host_ip}/24", "dev", self.bridge)
        sh("ip", "link", "set", self.bridge, "up")
        for i, rate in enumerate(self.rates):
            link = Link(
                i, f"{self.tag}-p{i}", f"{self.tag}h{i}", f"{self.tag}n{i}",
                f"198.18.{self.subnet}.{i + 2}", rate,
            )  # fmt: skip
            self.links.append(link)
            join_bridge(link.ns, link.host_end, link.ns_end, link.ip, self.bridge)
            self.shape(link, rate)

    def shape(self, link: Link, rate_bps: float) -> None:
        """Token-bucket both directions: egress of the namespace end (the peer's upload) and
        egress of the bridge end (its download)."""
        rate = f"{int(rate_bps)}bit"
        # the bucket must hold at least one GSO super-packet (64 KiB), and ~10 ms at the rate
        burst = str(max(int(rate_bps / 8 / 100), 96 * 1024))
        tbf = ("tbf", "rate", rate, "burst", burst, "latency", "200ms")
        sh("ip", "netns", "exec", link.ns, "tc", "qdisc", "replace", "dev", link.ns_end, "root",
           *tbf)  # fmt: skip
        sh("tc", "qdisc", "replace", "dev", link.host_end, "root", *tbf)
        link.rate_bps = rate_bps

    def cut(self, index: int) -> None:
        """Cut peer `index`'s link (both veth ends down): its packets go nowhere."""
        link = self.links[index]
        sh("ip", "link", "set", link.host_end, "down")
        sh("ip", "netns", "exec", link.ns, "ip", "link", "set", link.ns_end, "down")

    def restore(self, index: int) -> None:
        link = self.links[index]
        sh("ip", "link", "set", link.host_end, "up")
        sh("ip", "netns", "exec", link.ns, "ip", "link", "set", link.ns_end, "up")
        self.shape(link, link.rate_bps)

    def teardown(self) -> None:
        if self.up:
            remove_tag(self.tag)
            self.up = False


def join_bridge(ns: str, host_end: str, ns_end: str, ip: str, bridge: str) -> None:
    """A new namespace `ns` on `bridge` by a veth pair (`host_end` on the bridge, `ns_end`
    inside at `ip`/24), its loopback and its leg up: every lab's one way to seat a host."""
    sh("ip", "netns", "add", ns)
    sh("ip", "link", "add", host_end, "type", "veth", "peer", "name", ns_end)
    sh("ip", "link", "set", ns_end, "netns", ns)
    sh("ip", "link", "set", host_end, "master", bridge)
    sh("ip", "link", "set", host_end, "up")
    nsx = ("ip", "netns", "exec", ns)
    sh(*nsx, "ip", "link", "set", "lo", "up")
    sh(*nsx, "ip", "addr", "add", f"{ip}/24", "dev", ns_end)
    sh(*nsx, "ip", "link", "set", ns_end, "up")


def _free_subnet() -> int:
    used = set(re.findall(r"inet 198\.18\.(\d+)\.", sh("ip", "-o", "addr").stdout))
    for s in range(1, 255):
        if str(s) not in used:
            return s
    raise NetLabError("no free 198.18.X.0/24 subnet for the lab")


def _tags_in_use() -> set[str]:
    names = sh("ip", "netns", "list", check=False).stdout.split()
    names += re.findall(r"^\d+: ([^:@ ]+)", sh("ip", "-o", "link").stdout, re.M)
    return {m.group(1) for n in names if (m := re.match(rf"^({PREFIX}\d+)", n))}


def remove_tag(tag: str) -> None:
    """Kill what runs in the tag's namespaces, delete them, its veths and its bridge."""
    for ns in sh("ip", "netns", "list", check=False).stdout.split():
        if ns.startswith(f"{tag}-"):
            pids = sh("ip", "netns", "pids", ns, check=False).stdout.split()
            for pid in pids:  # our own peers, left running by a crashed lab run
                sh("kill", "-9", pid, check=False)
            sh("ip", "netns", "del", ns, check=False)
    for name in re.findall(r"^\d+: ([^:@ ]+)", sh("ip", "-o", "link").stdout, re.M):
        if re.match(rf"^{tag}[bhn]\d*$", name):
            sh("ip", "link", "del", name, check=False)


def cleanup_stale(everything: bool = False) -> list[str]:
    """Remove what labs whose process is gone left behind (all labs with `everything`)."""
    removed = []
    for tag in sorted(_tags_in_use()):
        pid = int(tag[len(PREFIX) :])
        if everything or not os.path.exists(f"/proc/{pid}"):
            remove_tag(tag)
            removed.append(tag)
    return removed
