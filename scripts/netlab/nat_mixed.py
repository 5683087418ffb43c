"""The mixed NAT swarm (issue 31): 2 reachable peers and 2 behind two different NATs, on links of
100 and 20 Mbit/s (tc tbf), against the same swarm with every peer reachable on the same links.

    sudo python -m scripts.netlab.nat_mixed --seconds 150 [--target 0.96]

`a` (100 Mbit/s) and `b` (20) sit on the bridge; `h1` (100) and `h2` (20) each behind a router
of its own that masquerades its home network and drops new connections into it (as
scripts/netlab/nat.py); the rate is the router's uplink. The control puts h1 and h2 on the
bridge with the same rates. Each peer runs docs/deploy.md's quickstart line (the shard count
4, one per peer), no port forward, no extra flag. Prints per arm each peer's rounds, served
requests, pushes mixed and refused, utilization and late-window accuracy (the mean over the
last sixth of its evaluations), the time from the last start until every peer's accuracy is at
`--target`, and every WARNING or ERROR line.
"""

from __future__ import annotations

import argparse
import os
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from statistics import mean
from typing import Any

from scripts.netlab.nat import status
from scripts.netlab.net import (
    PREFIX,
    NetLabError,
    _free_subnet,
    cleanup_stale,
    join_bridge,
    remove_tag,
    sh,
)

RATES = {"a": "100mbit", "b": "20mbit", "h1": "100mbit", "h2": "20mbit"}
HOMES = ("h1", "h2")


def _shape(ns: str, ns_end: str, host_end: str, rate: str) -> None:
    """Token-bucket both directions of one bridge leg (as net.LabNet.shape)."""
    bps = float(rate[:-4]) * 1e6
    burst = str(max(int(bps / 8 / 100), 96 * 1024))
    tbf = ("tbf", "rate", f"{int(bps)}bit", "burst", burst, "latency", "200ms")
    sh("ip", "netns", "exec", ns, "tc", "qdisc", "replace", "dev", ns_end, "root", *tbf)
    sh("tc", "qdisc", "replace", "dev", host_end, "root", *tbf)


def _leg(tag: str, i: int, ns: str, ip: str, br: str, rate: str) -> str:
    """A namespace on the bridge at `ip`, its leg shaped at `rate`; the leg's inner name."""
    host_end, ns_end = f"{tag}h{i}", f"{tag}n{i}"
    join_bridge(ns, host_end, ns_end, ip, br)
    _shape(ns, ns_end, host_end, rate)
    return ns_end


def _home(tag: str, i: int, router: str, out_dev: str, net: str) -> str:
    """A home network `net`.0/24 behind `router` (masquerading, new inbound dropped)."""
    home = f"{tag}-h{i}"
    inside, leg = f"{tag}i{i}", f"{tag}j{i}"
    sh("ip", "netns", "add", home)
    sh("ip", "link", "add", inside, "type", "veth", "peer", "name", leg)
    sh("ip", "link", "set", inside, "netns", router)
    sh("ip", "link", "set", leg, "netns", home)
    rx, hx = ("ip", "netns", "exec", router), ("ip", "netns", "exec", home)
    sh(*rx, "ip", "addr", "add", f"{net}.1/24", "dev", inside)
    sh(*rx, "ip", "link", "set", inside, "up")
    sh(*rx, "sysctl", "-qw", "net.ipv4.ip_forward=1")
    sh(*rx, "iptables", "-t", "nat", "-A", "POSTROUTING", "-o", out_dev, "-j", "MASQUERADE")
    sh(*rx, "iptables", "-A", "FORWARD", "-m", "conntrack", "--ctstate", "ESTABLISHED,RELATED",
       "-j", "ACCEPT")  # fmt: skip
    sh(*rx, "iptables", "-A", "FORWARD", "-i", inside, "-o", out_dev, "-j", "ACCEPT")
    sh(*rx, "iptables", "-A", "FORWARD", "-j", "DROP")
    sh(*hx, "ip", "link", "set", "lo", "up")
    sh(*hx, "ip", "addr", "add", f"{net}.2/24", "dev", leg)
    sh(*hx, "ip", "link", "set", leg, "up")
    sh(*hx, "ip", "route", "add", "default", "via", f"{net}.1")
    return f"{net}.2"


def build(tag: str, s: int, nat: bool) -> dict[str, str]:
    """The bridge, a and b on it, h1 and h2 behind routers of their own (or on the bridge:
    the control); the address of each peer."""
    br = f"{tag}b"
    sh("ip", "link", "add", br, "type", "bridge")
    sh("ip", "addr", "add", f"198.18.{s}.1/24", "dev", br)
    sh("ip", "link", "set", br, "up")
    ips = {"a": f"198.18.{s}.2", "b": f"198.18.{s}.3"}
    for i, name in enumerate(("a", "b")):
        _leg(tag, i, f"{tag}-{name}", ips[name], br, RATES[name])
    for i, name in enumerate(HOMES, start=1):
        outside = f"198.18.{s}.{3 + i}"
        if not nat:
            _leg(tag, 1 + i, f"{tag}-{name}", outside, br, RATES[name])
            ips[name] = outside
            continue
        router = f"{tag}-r{i}"
        out_dev = _leg(tag, 1 + i, router, outside, br, RATES[name])
        net = f"198.19.{(s + 100 * (i - 1)) % 256}"
        ips[name] = _home(tag, i, router, out_dev, net)
        for peer in ("a", "b"):  # the home prefix routed to its router: a dial is a black hole
            sh("ip", "netns", "exec", f"{tag}-{peer}", "ip", "route", "add", f"{net}.0/24",
               "via", outside)  # fmt: skip
    return ips


def lines(ips: dict[str, str]) -> dict[str, str]:
    """docs/deploy.md's quickstart, word for word but for the addresses and 4 shards."""
    a, b = ips["a"], ips["b"]
    common = "--listen 0.0.0.0:7070"
    return {
        "a": f"swarmnode start {common} --name a --shard 0/4 --steps 0",
        "b": f"swarmnode start {common} --name b --join {a}:7070 --shard auto --steps 0",
        "h1": f"swarmnode start {common} --name h1 --join {b}:7070 --shard auto --steps 0",
        "h2": f"swarmnode start {common} --name h2 --join {a}:7070 --shard auto --steps 0",
    }


def run(seconds: float, nat: bool, target: float) -> dict[str, Any]:
    """One arm: build, start the four in turn, sample every second for `seconds`."""
    tag = f"{PREFIX}{os.getpid()}"
    cleanup_stale()
    remove_tag(tag)
    s = _free_subnet()
    bindir = Path(sys.executable).parent
    env = {**os.environ, "PATH": f"{bindir}:{os.environ.get('PATH', '')}",
           "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1"}  # fmt: skip
    logs = Path(tempfile.mkdtemp(prefix="natmixed-"))
    procs: list[subprocess.Popen] = []
    evals: dict[str, dict[int, float]] = {n: {} for n in RATES}
    reached: float | None = None
    try:
        ips = build(tag, s, nat)
        for name, line in lines(ips).items():
            ns = f"{tag}-{name}"
            (logs / name).mkdir()
            out = open(logs / f"{name}.log", "w")
            procs.append(subprocess.Popen(["ip", "netns", "exec", ns, *shlex.split(line)],
                                          stdout=out, stderr=subprocess.STDOUT, env=env,
                                          cwd=logs / name))  # fmt: skip
            deadline = time.monotonic() + 60
            while True:
                try:
                    if status(ns)["self"]["state"] == "alive":
                        break
                except (NetLabError, ValueError, KeyError):
                    pass
                if time.monotonic() > deadline:
                    raise NetLabError(f"{name} did not start: see {logs / name}.log")
                time.sleep(0.5)
        t0 = time.monotonic()
        start = {n: status(f"{tag}-{n}")["self"] for n in RATES}
        while time.monotonic() - t0 < seconds:
            time.sleep(1.0)
            now = {n: status(f"{tag}-{n}")["self"] for n in RATES}
            for n, me in now.items():
                if me["acc"] is not None:
                    evals[n][me["step"]] = me["acc"]
            if reached is None and all((me["acc"] or 0) >= target for me in now.values()):
                reached = time.monotonic() - t0
        end = {n: status(f"{tag}-{n}")["self"] for n in RATES}
    finally:
        for p in procs:
            p.terminate()
        for p in procs:
            try:
                p.wait(10)
            except subprocess.TimeoutExpired:
                p.kill()
        remove_tag(tag)
    bad = [f"[{n}] {ln}" for n in RATES for ln in (logs / f"{n}.log").read_text().splitlines()
           if " WARNING " in ln or " ERROR " in ln]  # fmt: skip
    return {"start": start, "end": end, "evals": evals, "reached": reached, "bad": bad,
            "logs": logs, "nat": nat}  # fmt: skip


def late_mean(evals: dict[int, float]) -> float | None:
    accs = [a for _, a in sorted(evals.items())]
    return mean(accs[-max(1, len(accs) // 6) :]) if accs else None


def report(arm: dict[str, Any], target: float) -> None:
    name = "NAT (h1, h2 outbound-only)" if arm["nat"] else "control (all reachable)"
    print(f"\n== {name}; logs in {arm['logs']}")
    print("peer rate     reach    rounds applied served mixed refused util  late-acc")
    for n in RATES:
        s, e = arm["start"][n], arm["end"][n]
        d = {k: e["exchange"][k] - s["exchange"][k]
             for k in ("rounds", "applied", "served", "pushes_mixed", "pushes_refused")}  # fmt: skip
        acc = late_mean(arm["evals"][n])
        print(f"{n:4} {RATES[n]:8} {e.get('reach')!s:8} {d['rounds']:6} {d['applied']:7} "
              f"{d['served']:6} {d['pushes_mixed']:5} {d['pushes_refused']:7} "
              f"{e['utilization']:.2f}  {acc if acc is None else f'{acc:.2%}'}")  # fmt: skip
    accs = [a for n in RATES if (a := late_mean(arm["evals"][n])) is not None]
    reached = arm["reached"]
    print(
        f"swarm late-window mean {mean(accs):.2%}; every peer at {target:.0%} after "
        f"{'never' if reached is None else f'{reached:.0f} s'}"
    )
    print(f"WARNING/ERROR lines: {len(arm['bad'])}")
    for ln in arm["bad"][:10]:
        print("  " + ln)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seconds", type=float, default=150.0, help="how long each arm trains")
    p.add_argument("--target", type=float, default=0.96, help="accuracy to time")
    args = p.parse_args()
    arms = [run(args.seconds, nat, args.target) for nat in (True, False)]
    for arm in arms:
        report(arm, args.target)
    return 0


if __name__ == "__main__":
    sys.exit(main())
