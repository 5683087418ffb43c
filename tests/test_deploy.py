"""The deployment files docs/deploy.md points to (docs/deploy/): the systemd unit passes
`systemd-analyze verify` (skipped where that tool is absent) and, with the environment it sets
and the example config, `swarmnode start` gets a valid configuration; the quickstart's config
file sets what its command line does."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from swarmnode.node.cli import cmd_start
from swarmnode.node.cli.command import build_parser

REPO = Path(__file__).resolve().parents[1]
UNIT = REPO / "docs" / "deploy" / "swarmnode@.service"
EXAMPLE = REPO / "docs" / "deploy" / "peer.toml"

pytestmark = pytest.mark.timeout(60)


def unit_environment(instance: str) -> dict[str, str]:
    """The unit's `Environment=` lines for `swarmnode@<instance>`."""
    text = UNIT.read_text().replace("%i", instance)
    return dict(m.split("=", 1) for m in re.findall(r"^Environment=(\S+)$", text, re.M))


@pytest.mark.slow  # runs systemd-analyze
@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="needs systemd-analyze")
def test_the_unit_passes_systemd_analyze_verify(tmp_path: Path) -> None:
    # verify checks that ExecStart's program exists: point it at this checkout's console script
    here = Path(sys.executable).parent / "swarmnode"
    text = UNIT.read_text().replace("/opt/swarmnode/bin/swarmnode", str(here))
    unit = tmp_path / "swarmnode@a.service"
    unit.write_text(text)
    proc = subprocess.run(
        ["systemd-analyze", "verify", str(unit)], capture_output=True, text=True, timeout=50
    )
    assert proc.returncode == 0 and not proc.stderr.strip(), proc.stderr


def test_the_units_environment_and_the_example_config_make_a_valid_peer(tmp_path: Path) -> None:
    env = unit_environment("a")
    assert env["SWARMNODE_CONFIG"] == "/etc/swarmnode/a.toml"
    env["SWARMNODE_CONFIG"] = str(EXAMPLE)  # installed there by docs/deploy.md's steps
    env["SWARMNODE_CHECKPOINT_DIR"] = str(tmp_path / "a")  # the unit's StateDirectory
    resolved = cmd_start.resolve(build_parser().parse_args(["start"]), env)
    cfg = cmd_start.config_from(resolved)
    assert cfg.name == "a" and cfg.shard_auto and cfg.steps == 0
    assert cfg.listen == "0.0.0.0:7070" and cfg.join == ["10.0.0.5:7070", "10.0.0.6:7070"]
    assert resolved.sources["listen"] == str(EXAMPLE)


def quickstart_block(heading: str) -> str:
    """The first indented block after `heading` in docs/deploy.md, unindented."""
    text = "\n" + (REPO / "docs" / "deploy.md").read_text().split(f"\n{heading}\n", 1)[1]
    block = re.search(r"\n\n((?:    .*\n)+)", text)
    assert block is not None, f"no block under {heading}"
    return "".join(line[4:] + "\n" for line in block.group(1).splitlines())


def test_the_quickstarts_config_file_is_machine_cs_command_line(tmp_path: Path) -> None:
    toml = tmp_path / "peer.toml"
    toml.write_text(quickstart_block("### 3. The same, as config files"))
    toml.chmod(0o600)
    from_file = cmd_start.config_from(
        cmd_start.resolve(build_parser().parse_args(["start", "--config", str(toml)]), {})
    )
    line_c = [ln.split() for ln in quickstart_block("### 2. Start the peers").splitlines()][-1]
    assert line_c[:2] == ["swarmnode", "start"] and "--name" in line_c
    env = {"SWARMNODE_SECRET": "..."}  # the quickstart's step 1
    from_flags = cmd_start.config_from(
        cmd_start.resolve(build_parser().parse_args(line_c[1:]), env)
    )
    for key in ("name", "listen", "shard_auto", "steps", "secret"):
        assert getattr(from_file, key) == getattr(from_flags, key), key
    assert from_file.join[0] == from_flags.join[0]  # and A as a second seed
