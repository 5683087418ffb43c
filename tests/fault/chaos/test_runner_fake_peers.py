"""The chaos runner end to end against fake peers (tests/fault/chaos/fake_peer.py): timeline, deaths,
failures, the exit code, the swarm secret and signals."""

from __future__ import annotations

import asyncio
import dataclasses
import io
import json
import os
import signal
import sys
from pathlib import Path

import pytest
from swarmnode.fault.chaos.report import check_report, load_report
from swarmnode.fault.chaos.runner import ChaosError, ChaosRunner
from swarmnode.fault.chaos.scenario import parse_scenario_text
from swarmnode.node.cli.cmd_chaos import run_scenario

from tests.waiting import eventually, wait_for

FAKE = [sys.executable, str(Path(__file__).with_name("fake_peer.py"))]

SCENARIO = """
[scenario]
name = "fake-e2e"
duration = 8
sample_every = 0.5
params_every = 1
stop_grace = 3

[node]
model = "mlp:64"
steps = 0

[[peer]]
name = "a"
[[peer]]
name = "b"
[[peer]]
name = "c"

[[event]]
at = 1
action = "freeze"
peer = "b"
[[event]]
at = 1.5
action = "kill"
peer = "c"
id = "kill-c"
[[event]]
at = 2
action = "fault"
peer = "a"
spec = "drop=0.1,delay=50ms"
[[event]]
at = 3
action = "thaw"
peer = "b"
[[event]]
at = 3.5
action = "byzantine"
peer = "b"
kind = "gaussian"
[[event]]
at = 5.5
action = "restart"
peer = "c"

[[assert]]
kind = "membership"
after = "kill-c"
within = 6
[[assert]]
kind = "final_accuracy"
min = 0.999
must_fail = true
"""


def _gone(pid: int) -> bool:
    """True when `pid` is no longer one of our fake peers (reaped, or reused by another)."""
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return True
    return b"fake_peer" not in cmdline


@pytest.mark.slow
@pytest.mark.timeout(90)
def test_runner_end_to_end_with_fake_peers(tmp_path):
    scenario = parse_scenario_text(SCENARIO, source="fake.toml")
    out = io.StringIO()
    code, _ = run_scenario(scenario, tmp_path / "run", command=FAKE, out=out)
    text = out.getvalue()
    report = load_report(tmp_path / "run" / "report.json")
    assert check_report(report) == []
    assert code == 0, text
    assert report["result"] == "pass" and report["passed"]

    # the timeline ran in order, on time, and every event worked
    timeline = [e for e in report["timeline"] if e["index"] is not None]
    assert [e["action"] for e in timeline] == [
        "freeze",
        "kill",
        "fault",
        "thaw",
        "byzantine",
        "restart",
    ]
    assert all(e["ok"] for e in timeline), timeline
    for e in timeline:
        assert e["scheduled"] - 0.01 <= e["t"] <= e["scheduled"] + 2.0
    assert not [e for e in report["timeline"] if e["action"] == "died"]

    # frozen and dead peers give missing samples, never a stuck loop
    b = report["samples"]["b"]
    frozen = [s for s in b if 1.2 <= s["t"] <= 2.8]
    assert frozen and all(not s["ok"] and s["why"] == "frozen" for s in frozen)
    c = report["samples"]["c"]
    assert any(not s["ok"] and s["why"] == "down" for s in c if 1.6 <= s["t"] <= 3.9)
    times = [s["t"] for s in report["samples"]["a"]]
    assert times == sorted(times) and times[-1] >= scenario.duration
    assert len(times) >= scenario.duration / scenario.sample_every * 0.6

    # the admin requests reached the peers
    assert any("drop" in (s.get("faults") or "") for s in report["samples"]["a"] if s["ok"])
    assert any(s.get("byzantine") == "gaussian" for s in b if s["ok"] and s["t"] > 3.6)

    # the restart kept the peer id (same checkpoint dir), on a new process and port
    c_info = report["peers"]["c"]
    assert len(c_info["pids"]) == 2 and len(set(c_info["peer_ids"])) == 1
    assert c_info["final_state"] == "running" and c_info["exit_codes"][0] == -signal.SIGKILL

    # model distances between the honest peers that answered (a, and c while it runs)
    pairs = [d for d in report["distances"] if d["n"] >= 2]
    assert pairs and all(d["max"] is not None and d["max"] >= 0 for d in pairs)
    # b serves poison once byzantine (the fake adds 1000 to every coordinate): the runner pulled
    # it too and measured how far it lies from the nearest honest model
    poisoned = [d["byzantine"]["b"] for d in report["distances"] if d["t"] > 4 and "byzantine" in d]
    assert poisoned and min(p["nearest"] for p in poisoned) > 1000, report["distances"]
    assert report["reasons"] == [] and report["error"] is None

    results = {a["kind"]: a for a in report["assertions"]}
    assert results["membership"]["status"] == "pass"
    assert results["final_accuracy"]["status"] == "failed as expected"
    assert "[failed as expected] final_accuracy" in text and "result: PASS" in text

    # the progress lines, the plot, and no process left behind
    assert text.count("t=") >= 10
    assert report["plot"] == "plot.png" and (tmp_path / "run" / "plot.png").stat().st_size > 0
    pids = [pid for info in report["peers"].values() for pid in info["pids"]]
    assert len(pids) == 4
    assert all(_gone(pid) for pid in pids)


@pytest.mark.slow
@pytest.mark.timeout(60)
async def test_cancel_mid_run_stops_everything_and_records_a_death(tmp_path):
    text = SCENARIO.replace("duration = 8", "duration = 60").split("[[event]]")[0]
    scenario = parse_scenario_text(text, source="fake.toml")
    runner = ChaosRunner(scenario, tmp_path, command=FAKE, out=io.StringIO(), quiet=True)
    task = asyncio.create_task(runner.run())
    await eventually(lambda: all(runner.samples[n] for n in "abc"), 30, "first samples")
    victim = runner.peers["c"].proc.pid
    os.kill(victim, signal.SIGKILL)  # not the runner's doing: it must be recorded
    await eventually(lambda: any(e["action"] == "died" for e in runner.timeline), 10, "the death")
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    report = load_report(tmp_path / "report.json")
    assert check_report(report) == []
    assert report["result"] == "interrupted" and not report["passed"]
    died = [e for e in report["timeline"] if e["action"] == "died"]
    assert died[0]["peer"] == "c" and died[0]["exit_code"] == -signal.SIGKILL
    assert report["peers"]["c"]["final_state"] == "down"
    assert all(_gone(p.proc.pid) for p in runner.peers.values())


@pytest.mark.slow
def test_peer_that_cannot_start_fails_the_run_cleanly(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # and no matplotlib: JSON still written
    scenario = parse_scenario_text(SCENARIO, source="fake.toml")
    command = [sys.executable, "-c", "import sys; print('no luck'); sys.exit(3)"]
    out = io.StringIO()
    code, _ = run_scenario(scenario, tmp_path, command=command, out=out)
    assert code == 1
    report = load_report(tmp_path / "report.json")
    assert check_report(report) == []
    assert report["result"] == "error" and "exited with code 3" in report["error"]
    assert "no luck" in report["error"]
    assert "matplotlib is not installed" in out.getvalue()
    assert report["plot"] is None
    with pytest.raises(ChaosError, match="already holds a chaos run"):  # stale checkpoints
        run_scenario(scenario, tmp_path, command=command, out=out)


# --- failures end to end: report.json, the final table and the exit code ----------------------

SHORT = """
[scenario]
name = "short"
duration = 3
sample_every = 0.5
stop_grace = 3

[[peer]]
name = "a"
[[peer]]
name = "b"
"""
PARTITION = "[[event]]\nat = 1\naction = 'partition'\ngroups = [['a'], ['b']]\n"
HIGH_BAR = "[[assert]]\nkind = 'final_accuracy'\nmin = 0.999\n"
LOW_BAR = "[[assert]]\nkind = 'final_accuracy'\nmin = 0.1\n"


@pytest.mark.timeout(120)
@pytest.mark.parametrize(
    "extra, flags, result, reason",
    [
        (HIGH_BAR, [], "fail", "assertion final_accuracy: fail"),
        (PARTITION + LOW_BAR, ["--admin-fails"], "error", "'partition' failed: admin/fault on a"),
        (LOW_BAR, ["--die-after", "1", "--die-shard", "1"], "fail", "peer b died unexpectedly"),
    ],
    ids=["assertion", "event", "death"],
)
@pytest.mark.slow
def test_cli_exits_1_when_the_run_did_not_pass(tmp_path, capsys, extra, flags, result, reason):
    import shlex

    import swarmnode.node.cli.command as cli

    toml = tmp_path / "s.toml"
    toml.write_text(SHORT + extra)
    run_dir = tmp_path / "r"
    argv = ["chaos", str(toml), "--report", str(run_dir), "--no-plot", "--quiet"]
    code = cli.main([*argv, "--peer-command", shlex.join(FAKE + flags)])
    out = capsys.readouterr().out
    assert code == 1, out
    report = load_report(run_dir / "report.json")
    assert check_report(report) == []
    assert report["result"] == result and not report["passed"]
    assert any(reason in r for r in report["reasons"]), report["reasons"]
    assert (report["error"] is not None) == (result == "error")
    assert f"result: {result.upper()}" in out and reason in out


@pytest.mark.slow
@pytest.mark.timeout(60)
def test_cli_exits_0_when_everything_held(tmp_path, capsys):
    import shlex

    import swarmnode.node.cli.command as cli

    toml = tmp_path / "s.toml"
    toml.write_text(SHORT + LOW_BAR)
    argv = ["chaos", str(toml), "--report", str(tmp_path / "r"), "--no-plot", "--quiet"]
    assert cli.main([*argv, "--peer-command", shlex.join(FAKE)]) == 0, capsys.readouterr().out


# --- the swarm secret ----------------------------------------------------------------------------

SECRET_RUN = (
    SHORT.replace("duration = 3", "duration = 4\nparams_every = 1")
    + PARTITION
    + "[[event]]\nat = 2\naction = 'heal'\n"
    + "[[event]]\nat = 2.5\naction = 'slowdown'\npeer = 'b'\nfactor = 2\n"
    + LOW_BAR
)


@pytest.mark.slow
@pytest.mark.timeout(60)
@pytest.mark.parametrize("where", ["environment", "scenario"])
def test_runner_signs_its_requests_with_the_swarm_secret(tmp_path, monkeypatch, where):
    """The peers hold a secret (inherited from the runner's environment, or the scenario's):
    every admin request and parameter pull is signed, none gets 401, and the secret never
    appears in the argv or the report."""
    text = SECRET_RUN
    if where == "environment":
        monkeypatch.setenv("SWARMNODE_SECRET", "from-the-shell")
        secret = "from-the-shell"
    else:
        monkeypatch.setenv("SWARMNODE_SECRET", "a-stale-one")  # the scenario's wins
        text = text.replace('name = "short"', 'name = "short"\nsecret = "from-the-file"')
        secret = "from-the-file"
    out = io.StringIO()
    code, runner = run_scenario(
        parse_scenario_text(text, source="s.toml"),
        tmp_path / "r",
        command=FAKE,
        plot=False,
        out=out,
    )
    report = load_report(tmp_path / "r" / "report.json")
    assert code == 0, (report["reasons"], out.getvalue())
    assert all(e["ok"] for e in report["timeline"]), report["timeline"]
    assert [d for d in report["distances"] if d["n"] == 2 and not d["missing"]]
    assert all(runner.last_status[n]["self"]["auth"] for n in "ab")  # the fakes required it
    samples = [s for s in report["samples"]["b"] if s["ok"]]
    assert any("partition" in (s["faults"] or "") for s in samples)
    assert report["settings"]["authenticated"] is True
    raw = (tmp_path / "r" / "report.json").read_text()
    assert secret not in raw and secret not in out.getvalue()
    assert runner.secret == secret


@pytest.mark.timeout(60)
def test_without_a_secret_the_children_get_none(tmp_path, monkeypatch):
    monkeypatch.delenv("SWARMNODE_SECRET", raising=False)
    runner = ChaosRunner(parse_scenario_text(SHORT + LOW_BAR), tmp_path, command=FAKE)
    assert runner.signer is None and "SWARMNODE_SECRET" not in runner.supervisor.child_env()
    monkeypatch.setenv("SWARMNODE_SECRET", "shell")
    runner = ChaosRunner(parse_scenario_text(SHORT + LOW_BAR), tmp_path, command=FAKE)
    assert (
        runner.supervisor.child_env()["SWARMNODE_SECRET"] == "shell" and runner.signer is not None
    )


@pytest.mark.timeout(90)
async def test_probe_against_a_real_peer_with_a_secret(tmp_path):
    """The runner's signed requests against the real admin guard and the real params route:
    admin obeys only the operator key, params only the swarm secret, each bound to the peer."""
    import aiohttp
    from swarmnode.fault.chaos import probe
    from swarmnode.fault.inject.spec import parse_fault_spec
    from swarmnode.gossip.auth.operator import OperatorKey
    from swarmnode.gossip.auth.signer import Signer
    from swarmnode.node.peer.node import Node
    from swarmnode.node.settings import PeerConfig

    operator = OperatorKey.generate()
    (tmp_path / "operator.pub").write_bytes(operator.public_pem())
    admin_key = str(tmp_path / "operator.pub")
    cfg = PeerConfig(model="mlp:8", steps=0, listen="127.0.0.1:0", eval_every=10**6)
    cfg = dataclasses.replace(
        cfg, secret="s3", slowdown=4.0, enable_admin=True, admin_key=admin_key
    )
    node = await Node.create(cfg)
    try:
        async with aiohttp.ClientSession() as session:
            body = probe.fault_body(parse_fault_spec("delay=1ms"))
            unsigned = await probe.post_admin(session, node.addr, "fault", body, 5.0)
            assert unsigned.startswith("HTTP 401"), unsigned
            other = OperatorKey.generate()
            wrong = await probe.post_admin(session, node.addr, "fault", body, 5.0, other)
            assert wrong.startswith("HTTP 401"), wrong
            signed = await probe.post_admin(session, node.addr, "fault", body, 5.0, operator)
            assert signed == "" and "delay" in node.faults.config.to_spec()

            vec, why = await probe.fetch_params(session, node.addr, 5.0)
            assert vec is None and why.startswith("HTTP 401"), why
            # holding the secret is not being a member: `params` serves members' keys only
            vec, why = await probe.fetch_params(session, node.addr, 5.0, Signer("s3"))
            assert vec is None and why.startswith("HTTP 403"), why
            vec, why = await probe.fetch_params(session, node.addr, 5.0, operator=other)
            assert vec is None and why.startswith("HTTP 401"), why
            vec, why = await probe.fetch_params(session, node.addr, 5.0, operator=operator)
            assert why == "" and vec is not None and vec.size == node.store.size
    finally:
        await node.close()


CLI = """
import sys
import swarmnode.node.cli.command as cli
sys.exit(cli.main(sys.argv[1:]))
"""


@pytest.mark.slow
@pytest.mark.timeout(60)
@pytest.mark.parametrize("sig, code", [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_cli_signal_stops_every_peer(tmp_path, sig, code):
    import shlex
    import subprocess

    toml = tmp_path / "s.toml"
    toml.write_text(SCENARIO.replace("duration = 8", "duration = 60"))
    report = tmp_path / "r"
    argv = [sys.executable, "-c", CLI, "chaos", str(toml), "--report", str(report), "--quiet"]
    argv += ["--peer-command", shlex.join(FAKE)]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        ready = [report / "peers" / n / "ready.json" for n in "abc"]
        wait_for(lambda: all(r.exists() for r in ready), 30, "three ready peers")
        pids = [json.loads(r.read_text())["pid"] for r in ready]
        proc.send_signal(sig)
        out, _ = proc.communicate(timeout=30)
    finally:
        proc.kill()
        proc.wait()
    assert proc.returncode == code, out.decode()
    assert all(_gone(pid) for pid in pids)
    assert load_report(report / "report.json")["result"] == "interrupted"
