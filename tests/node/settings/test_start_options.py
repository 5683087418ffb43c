"""`swarmnode start`'s options, written once (node/settings/start_options.py): flags, `--config` file
keys, `SWARMNODE_<OPTION>` variables and `--print-config` all come from the same entries, and
every default is the config dataclass's."""

from __future__ import annotations

from dataclasses import fields
from pathlib import Path

import pytest
from swarmnode.node.cli import cmd_start
from swarmnode.node.cli.command import build_parser, main
from swarmnode.node.settings import START_OPTIONS, PeerConfig, build_config, start_options
from swarmnode.node.train.errors import ConfigError

pytestmark = pytest.mark.timeout(30)


def resolved(argv: list[str], env: dict[str, str] | None = None):
    args = build_parser().parse_args(["start", *argv])
    return cmd_start.resolve(args, env or {})


def config(argv: list[str], env: dict[str, str] | None = None) -> PeerConfig:
    return build_config(resolved(argv, env))


def test_defaults_are_the_config_dataclasses_defaults():
    got, want = config([]), PeerConfig()
    for f in fields(PeerConfig):
        assert getattr(got, f.name) == getattr(want, f.name), f.name


def test_every_option_has_help_a_real_field_and_one_flag_env_and_key():
    parser_flags = {o for a in build_parser()._actions for o in a.option_strings}
    sub = next(a for a in build_parser()._actions if hasattr(a, "choices") and a.choices)
    start_flags = {o for a in sub.choices["start"]._actions for o in a.option_strings}
    assert "--version" in parser_flags
    for opt in START_OPTIONS:
        assert opt.hidden or opt.help, opt.key
        assert opt.flag in start_flags
        assert opt.env == "SWARMNODE_" + opt.key.upper().replace("-", "_")
        cmd_start.start_options().defaults(opt.path)  # raises on a field path that is not one
    assert len(START_OPTIONS) >= 58


def test_file_then_environment_then_flags(tmp_path: Path):
    path = tmp_path / "peer.toml"
    path.write_text('lr = 0.02\nbatch_size = 16\nsteps = 7\nname = "a"\njoin = ["1.2.3.4:7070"]\n')
    env = {"SWARMNODE_LR": "0.03", "SWARMNODE_STEPS": "8"}
    r = resolved(["--config", str(path), "--steps", "9"], env)
    cfg = build_config(r)
    assert (cfg.lr, cfg.batch_size, cfg.steps, cfg.name) == (0.03, 16, 9, "a")
    assert cfg.join == ["1.2.3.4:7070"]
    assert r.sources["lr"] == "$SWARMNODE_LR" and r.sources["steps"] == "--steps"
    assert r.sources["batch-size"] == str(path) and r.sources["momentum"] == "default"


def test_the_config_file_may_come_from_the_environment(tmp_path: Path):
    path = tmp_path / "peer.toml"
    path.write_text("fanout = 5\n")
    assert config([], {"SWARMNODE_CONFIG": str(path)}).fanout == 5


def test_print_config_is_a_config_file_that_gives_the_same_config(tmp_path: Path, capsys):
    argv = ["--lr", "0.01", "--exchange", "robust", "--mix-rule", "replace", "--shard", "1/4",
            "--join", "10.0.0.5:7070,10.0.0.6:7070", "--enable-admin", "--admin-key", "k.pem",
            "--partition", "dirichlet:0.5", "--unsigned-exchange-for-bench"]  # fmt: skip
    assert main(["start", *argv, "--print-config"]) == 0
    out = capsys.readouterr().out
    assert "--lr" in out and "# default" in out
    path = tmp_path / "printed.toml"
    path.write_text(out)
    again, first = config(["--config", str(path)]), config(argv)
    hidden = {o.path for o in START_OPTIONS if o.hidden}
    for f in fields(PeerConfig):
        if f.name not in hidden:
            assert getattr(again, f.name) == getattr(first, f.name), f.name


def test_print_config_never_shows_the_secret():
    env_secret = "s3cr3t-value"
    args = build_parser().parse_args(["start"])
    r = cmd_start.resolve(args, {"SWARMNODE_SECRET": env_secret})
    text = start_options().describe(r)
    assert env_secret not in text and "secret" in text and "$SWARMNODE_SECRET" in text


@pytest.mark.parametrize(
    ("toml", "fragment"),
    [
        ("lrr = 0.1", "unknown key 'lrr'; did you mean 'lr'?"),
        ("bach_size = 8", "unknown key 'bach_size'; did you mean 'batch-size'?"),
        ("lr = 'abc'", "lr: expected a number, got 'abc'"),
        ("steps = 1.5", "steps: expected an integer"),
        ("enable_admin = 'yes please'", "expected true or false"),
        ("model = 3", "model: expected a string, got 3"),
        ("lr = true", "lr: expected a number, got true"),
        ("exchange = 'gossip'", "'gossip' is not one of average, robust"),
        ("[node]\nlr = 1", "unknown key 'node'"),
        ("lr = ", "not valid TOML"),
    ],
)
def test_a_bad_file_is_one_line_naming_the_file_and_key(tmp_path: Path, toml: str, fragment):
    path = tmp_path / "peer.toml"
    path.write_text(toml + "\n")
    with pytest.raises(ConfigError) as info:
        resolved(["--config", str(path)])
    assert fragment in str(info.value) and str(path) in str(info.value)


def test_a_bad_environment_value_names_its_variable():
    with pytest.raises(ConfigError, match=r"\$SWARMNODE_FANOUT: expected an integer"):
        resolved([], {"SWARMNODE_FANOUT": "three"})


def test_a_value_out_of_range_names_where_it_was_set(tmp_path: Path, capsys):
    path = tmp_path / "peer.toml"
    path.write_text("momentum = 1.5\n")
    assert main(["start", "--config", str(path)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.endswith(f"(set by {path})") and "error: momentum must" in err  # the file's key
    assert "--momentum" not in err


def test_a_value_out_of_range_names_the_variable_or_the_flag_that_set_it(capsys):
    env = {"SWARMNODE_MAX_LEAD": "0.5"}
    with pytest.raises(ConfigError, match=r"^\$SWARMNODE_MAX_LEAD has an invalid value: 0.5$"):
        cmd_start.config_from(resolved([], env))
    with pytest.raises(ConfigError, match=r"^--max-lead has an invalid value: 0.5$"):
        cmd_start.config_from(resolved(["--max-lead", "0.5"], env))


def test_a_missing_config_file_is_one_line(capsys):
    assert main(["start", "--config", "/nonexistent/peer.toml"]) == 2
    assert "cannot read" in capsys.readouterr().err


def test_log_options_go_before_or_after_any_verb():
    for argv in (["--log-level", "debug", "status"], ["status", "--log-level", "DEBUG"]):
        args = build_parser().parse_args(argv)
        assert args.opt_log_level.upper() == "DEBUG"
    args = build_parser().parse_args(["keygen", "--log-json"])
    assert args.opt_log_json == "true"


def test_help_shows_each_default_once_and_what_steps_0_means(capsys):
    with pytest.raises(SystemExit):
        main(["start", "--help"])
    text = capsys.readouterr().out
    assert "(default: None)" not in text and "0: train until stopped" in text
    assert text.count("(default: 1500)") == 1


def test_help_shows_the_common_options_first_and_points_to_the_reference(capsys):
    with pytest.raises(SystemExit):
        main(["start", "--help"])
    text = capsys.readouterr().out
    assert "docs/options.md" in text.split("options:")[0]  # said before the options begin
    headings = [line for line in text.splitlines() if line.endswith(":") and line[0] != " "]
    assert headings[:2] == ["options:", "common options:"], headings
    common = text.split("common options:")[1].split("\n\n")[0]
    flags = [w for w in common.split() if w.startswith("--") and w[2:3].isalpha()]
    want = {"--config", "--model", "--data", "--steps", "--listen", "--join", "--advertise"}
    assert want | {"--secret", "--checkpoint-dir", "--name", "--device"} <= set(flags)
    assert len(set(flags)) <= 12, flags  # a first screen, not the table
    assert len(text.split("common options:")[0].splitlines()) <= 25  # no 30-line usage first
