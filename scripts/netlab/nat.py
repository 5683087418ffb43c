"""The NAT lab (issue 31): two reachable peers and a "home" peer behind a masquerading router.

    sudo python -m scripts.netlab.nat --seconds 60 [--home-args "--reachable yes"]

Namespaces, all in 198.18.0.0/15: `a` and `b` on a bridge (198.18.S.0/24), a router with one
leg on that bridge and one on the home network (198.19.S.0/24), the home peer behind it. The
router masquerades what leaves the home network and drops new connections coming in
(`-t nat POSTROUTING -j MASQUERADE`, FORWARD `ESTABLISHED,RELATED -j ACCEPT`, then `DROP`);
`a` and `b` route the home prefix to the router, so a dial into it is a black hole (it waits
for its deadline), as a private address is from the internet. The peers run the quickstart's
lines of docs/deploy.md word for word (addresses substituted), no port forward, no extra flag;
`--home-args` adds flags to the home peer's line (`--reachable yes`: the behaviour before);
`--no-nat` puts the home peer on the bridge too (the control: every peer reachable).
Prints each peer's rounds applied, utilization and steps, the home peer's first log lines and
every WARNING or ERROR line of every log.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from scripts.netlab.net import (
    PREFIX,
    NetLabError,
    _free_subnet,
    cleanup_stale,
    join_bridge,
    remove_tag,
    sh,
)

PORT = 7070


def build(tag: str, s: int, nat: bool = True) -> dict[str, str]:
    """The namespaces and routes; the address of each peer. Without `nat` the home peer is on
    the bridge too (the control: every peer reachable)."""
    br = f"{tag}b"
    sh("ip", "link", "add", br, "type", "bridge")
    sh("ip", "addr", "add", f"198.18.{s}.1/24", "dev", br)
    sh("ip", "link", "set", br, "up")
    outside = {"a": f"198.18.{s}.2", "b": f"198.18.{s}.3", "r": f"198.18.{s}.4"}
    if not nat:
        outside = {"a": outside["a"], "b": outside["b"], "home": f"198.18.{s}.5"}
    for i, (name, ip) in enumerate(outside.items()):
        ns = f"{tag}-{name}"
        join_bridge(ns, f"{tag}h{i}", f"{tag}n{i}", ip, br)
        nsx = ("ip", "netns", "exec", ns)
        if (
            name in ("a", "b") and nat
        ):  # the home prefix is routed to the router: a dial into it is lost
            sh(*nsx, "ip", "route", "add", f"198.19.{s}.0/24", "via", outside["r"])
    if not nat:
        return outside
    home_ip, inside_ip = f"198.19.{s}.2", f"198.19.{s}.1"
    router, home = f"{tag}-r", f"{tag}-home"
    sh("ip", "netns", "add", home)
    sh("ip", "link", "add", f"{tag}h9", "type", "veth", "peer", "name", f"{tag}n9")
    sh("ip", "link", "set", f"{tag}h9", "netns", router)
    sh("ip", "link", "set", f"{tag}n9", "netns", home)
    rx, hx = ("ip", "netns", "exec", router), ("ip", "netns", "exec", home)
    sh(*rx, "ip", "addr", "add", f"{inside_ip}/24", "dev", f"{tag}h9")
    sh(*rx, "ip", "link", "set", f"{tag}h9", "up")
    sh(*rx, "sysctl", "-qw", "net.ipv4.ip_forward=1")
    out_dev = f"{tag}n2"
    sh(*rx, "iptables", "-t", "nat", "-A", "POSTROUTING", "-o", out_dev, "-j", "MASQUERADE")
    sh(*rx, "iptables", "-A", "FORWARD", "-m", "conntrack", "--ctstate", "ESTABLISHED,RELATED",
       "-j", "ACCEPT")  # fmt: skip
    sh(*rx, "iptables", "-A", "FORWARD", "-i", f"{tag}h9", "-o", out_dev, "-j", "ACCEPT")
    sh(*rx, "iptables", "-A", "FORWARD", "-j", "DROP")
    sh(*hx, "ip", "link", "set", "lo", "up")
    sh(*hx, "ip", "addr", "add", f"{home_ip}/24", "dev", f"{tag}n9")
    sh(*hx, "ip", "link", "set", f"{tag}n9", "up")
    sh(*hx, "ip", "route", "add", "default", "via", inside_ip)
    return {"a": outside["a"], "b": outside["b"], "home": home_ip}


def lines(ips: dict[str, str], home_args: str) -> dict[str, str]:
    """docs/deploy.md's quickstart, word for word but for the addresses (and --home-args)."""
    a, b = ips["a"], ips["b"]
    return {
        "a": "swarmnode start --listen 0.0.0.0:7070 --name a --shard 0/3 --steps 0",
        "b": f"swarmnode start --listen 0.0.0.0:7070 --name b --join {a}:7070 --shard auto "
        "--steps 0",
        "home": f"swarmnode start --listen 0.0.0.0:7070 --name c --join {b}:7070 --shard auto "
        f"--steps 0 {home_args}".strip(),
    }


_GET = (
    "import sys, urllib.request; "
    f"sys.stdout.write(urllib.request.urlopen('http://127.0.0.1:{PORT}/v1/status', "
    "timeout=3).read().decode())"
)


def status(ns: str) -> dict:
    """A peer's /v1/status, read inside its namespace (the home one is not routed from here)."""
    out = sh("ip", "netns", "exec", ns, sys.executable, "-c", _GET)
    return json.loads(out.stdout)


def run(seconds: float, home_args: str, nat: bool = True) -> dict[str, Any]:
    """Build the lab, run the three lines for `seconds`, print the figures; what was read:
    {"self": {name: its /v1/status self}, "failed": {name: dials into the NAT}, "logs": dir}."""
    got: dict[str, Any] = {"self": {}, "failed": {}}
    tag = f"{PREFIX}{os.getpid()}"
    cleanup_stale()
    remove_tag(tag)  # what an earlier lab of this same process left: labs here run one at a time
    s = _free_subnet()
    procs: list[subprocess.Popen] = []
    bindir = Path(sys.executable).parent
    env = {**os.environ, "PATH": f"{bindir}:{os.environ.get('PATH', '')}",
           "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1"}  # fmt: skip
    logs = got["logs"] = Path(tempfile.mkdtemp(prefix="natlab-"))
    try:
        ips = build(tag, s, nat)
        for name, line in lines(ips, home_args).items():
            print(f"[{name}] $ {line}")
            ns = f"{tag}-{name}"
            work = logs / name
            work.mkdir()
            out = open(logs / f"{name}.log", "w")
            procs.append(subprocess.Popen(["ip", "netns", "exec", ns, *shlex.split(line)],
                                          stdout=out, stderr=subprocess.STDOUT, env=env,
                                          cwd=work))  # fmt: skip
            deadline = time.monotonic() + 60
            while True:  # each joins a running peer, as a user would wait for the line before
                try:
                    if status(ns)["self"]["state"] == "alive":
                        break
                except (NetLabError, ValueError, KeyError):
                    pass
                if time.monotonic() > deadline:
                    raise NetLabError(f"{name} did not start: see {logs / name}.log")
                time.sleep(0.5)
        time.sleep(seconds)
        for name in ("a", "b", "home"):
            me = status(f"{tag}-{name}")["self"]
            ex = me["exchange"]
            home = f"{ips['home']}:{PORT}"  # the dials into the NAT, and what they cost
            failed = sum(ln["failures"] for ln in me["links"] if ln["addr"] == home)
            got["self"][name], got["failed"][name] = me, failed
            print(f"{name}: reach={me.get('reach')} step={me['step']} rounds={ex['rounds']} "
                  f"applied={ex['applied']} served={ex['served']} "
                  f"utilization={me['utilization']:.2f} acc={me['acc']} "
                  f"failed_dials_to_home={failed} max_round_s={ex['max_round_s']}")  # fmt: skip
    finally:
        for p in procs:
            p.terminate()
        for p in procs:
            try:
                p.wait(10)
            except subprocess.TimeoutExpired:
                p.kill()
        remove_tag(tag)
    head = (logs / "home.log").read_text().splitlines()
    print("home's first log lines:\n  " + "\n  ".join(head[:8]))
    bad = 0
    for name in ("a", "b", "home"):
        for ln in (logs / f"{name}.log").read_text().splitlines():
            if " WARNING " in ln or " ERROR " in ln:
                bad += 1
                print(f"[{name}] {ln}")
    print(f"WARNING/ERROR lines: {bad}; logs in {logs}")
    return got


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seconds", type=float, default=60.0, help="how long the three train")
    p.add_argument("--home-args", default="", help="flags added to the home peer's line")
    p.add_argument("--no-nat", action="store_true", help="the control: home on the bridge too")
    args = p.parse_args()
    run(args.seconds, args.home_args, nat=not args.no_nat)
    return 0


if __name__ == "__main__":
    sys.exit(main())
