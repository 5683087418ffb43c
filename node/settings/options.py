"""Options written once: each is one `Option`, from which its command-line flag, its key in a
`--config` file, its `SWARMNODE_<OPTION>` environment variable, its Python keyword
(`swarmnode.Peer(model, sync_every=10)`) and its `--print-config` line are all made.

An option names the config field it sets (a dotted path, `exchange.timeout`), and its default is
that field's default in the config dataclass: nothing here repeats a default. Values arrive as
text (a flag, an environment variable, a string in the file) or as a TOML value, and pass through
the option's one `parse`, so `--lr abc`, `lr = "abc"` and `SWARMNODE_LR=abc` fail with the same
one line, naming where the value came from.

Precedence, lowest first: the dataclass default, the `--config` file, the environment, the flags.
"""

from __future__ import annotations

import argparse
import json
import math
import numbers
import os
import sys
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from swarmnode.kernels.errors import did_you_mean
from swarmnode.node.train import ConfigError

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - pyproject pulls tomli for 3.10
    import tomli as tomllib

ENV_PREFIX = "SWARMNODE_"
DEFAULT = "default"
COMMON = "common options"  # the help group of the few options a new user needs


def parse_int(text: str) -> int:
    try:
        return int(text.strip())
    except ValueError:
        raise ConfigError(f"expected an integer, got {text!r}") from None


def parse_float(text: str) -> float:
    try:
        value = float(text.strip())
    except ValueError:
        raise ConfigError(f"expected a number, got {text!r}") from None
    if not math.isfinite(value):
        raise ConfigError(f"expected a finite number, got {text!r}")
    return value


def parse_str(text: str) -> str:
    return text


def parse_bool(text: str) -> bool:
    low = text.strip().lower()
    if low in ("1", "true", "yes", "on"):
        return True
    if low in ("0", "false", "no", "off", ""):
        return False
    raise ConfigError(f"expected true or false, got {text!r}")


@dataclass(frozen=True)
class Option:
    """One setting. `key` is the flag without `--` (`batch-size`); in a file `batch-size` and
    `batch_size` both work; its environment variable is `SWARMNODE_BATCH_SIZE`.

    `field` is the config field it sets (default: the key with `_`; "" for an option that sets
    no config field, e.g. the log level); `parse` turns text into the field's value and `show`
    turns the value back into text (help, `--print-config`). A `switch` takes no value on the
    command line (`--enable-admin`); `invert` makes it set its field to False. `native` turns a
    Python value that is not text (a keyword's `shard=(0, 2)`, a model object) into the
    field's value. `common` puts it among the few that `start --help` lists first."""

    key: str
    help: str
    field: str | None = None
    parse: Callable[[str], Any] = parse_str
    show: Callable[[Any], str] | None = None
    metavar: str | None = None
    choices: tuple[str, ...] | None = None
    switch: bool = False
    invert: bool = False
    hidden: bool = False
    secret: bool = False  # `--print-config` masks it
    group: str = ""
    kind: type = str  # what a TOML value may be besides a string (int, float, bool)
    native: Callable[[Any], Any] | None = None
    common: bool = False

    @property
    def path(self) -> str:
        return self.key.replace("-", "_") if self.field is None else self.field

    @property
    def env(self) -> str:
        return ENV_PREFIX + self.key.replace("-", "_").upper()

    @property
    def keyword(self) -> str:
        """The Python keyword: the key with `_` (`sync_every`)."""
        return self.key.replace("-", "_")

    @property
    def flag(self) -> str:
        return "--" + self.key

    @property
    def dest(self) -> str:
        return "opt_" + self.key.replace("-", "_")

    def from_text(self, text: str) -> Any:
        """The field's value for `text`; raises ConfigError (without saying where from)."""
        if self.switch:
            on = parse_bool(text)
            return not on if self.invert else on
        if self.choices is not None and text not in self.choices:
            hint = did_you_mean(text, self.choices)
            raise ConfigError(f"{text!r} is not one of {', '.join(self.choices)}{hint}")
        return self.parse(text)

    def from_toml(self, value: Any) -> Any:
        """The field's value for a TOML value: a string is parsed like a flag's text; a number,
        a boolean or a list only where the option takes one."""
        if isinstance(value, str):
            return self.from_text(value)
        if isinstance(value, bool):
            if not self.switch:
                raise ConfigError(f"expected {self.expects()}, got {str(value).lower()}")
            return not value if self.invert else value
        if isinstance(value, (int, float)) and self.kind in (int, float):
            if self.kind is int and not isinstance(value, int):
                raise ConfigError(f"expected an integer, got {value!r}")
            return self.from_text(repr(value))
        if isinstance(value, list) and self.kind is list:
            return self.from_text(",".join(str(v) for v in value))
        raise ConfigError(f"expected {self.expects()}, got {_toml(value)}")

    def from_python(self, value: Any) -> Any:
        """The field's value for a Python keyword's value: the text a flag takes, or the
        natural value (a number for a numeric option, a bool for a switch, a list for a list,
        what `native` takes); anything else raises ConfigError."""
        if self.native is not None and not isinstance(value, str):
            return self.native(value)
        if isinstance(value, str):
            return self.from_text(value)
        if isinstance(value, bool):  # before the numbers: a bool is an int to Python
            if not self.switch:
                raise ConfigError(f"expected {self.expects()}, got {value}")
            return not value if self.invert else value
        if isinstance(value, numbers.Integral) and self.kind in (int, float):
            return self.from_text(str(int(value)))
        if isinstance(value, numbers.Real) and self.kind is float:
            return self.from_text(repr(float(value)))
        if isinstance(value, list | tuple) and self.kind is list:
            if all(isinstance(v, str) for v in value):
                return self.from_text(",".join(value))
        raise ConfigError(f"expected {self.expects()}, got {_python(value)}")

    def expects(self) -> str:
        """What a value of this option may be, for an error message."""
        if self.switch:
            return "true or false"
        if self.choices is not None:
            return "one of " + ", ".join(self.choices)
        return {int: "an integer", float: "a number", list: "a list or a string"}.get(
            self.kind, "a string"
        )

    def text_of(self, value: Any) -> str:
        """`value` (the field's) as the text a flag would take."""
        if self.switch:
            return str(value != self.invert).lower()
        if self.show is not None:
            return self.show(value)
        return "" if value is None else str(value)

    def toml_of(self, value: Any) -> str:
        """`value` as a TOML value, for a `--print-config` line a config file can reuse."""
        if self.switch:
            return str(value != self.invert).lower()
        text = self.text_of(value)
        if self.kind in (int, float) and self.show is None and value is not None:
            return text
        return json.dumps(text)


@dataclass
class Resolved:
    """Every option's value (the field's) and where it came from: `default`, the config
    file's path, `$SWARMNODE_X` or `--flag`."""

    values: dict[str, Any] = field(default_factory=dict)
    sources: dict[str, str] = field(default_factory=dict)

    def set(self, opt: Option, value: Any, source: str) -> None:
        self.values[opt.key] = value
        self.sources[opt.key] = source


class OptionSet:
    """The options of one verb, and everything made from them."""

    def __init__(self, options: Iterable[Option], defaults: Callable[[str], Any]) -> None:
        self.options = list(options)
        self.by_key = {o.key: o for o in self.options}
        self.defaults = defaults  # field path -> its dataclass default
        if len(self.by_key) != len(self.options):
            raise ValueError("two options share a key")

    # --- the command line ----------------------------------------------------------------

    def add_to(self, parser: argparse.ArgumentParser, common: Any = None) -> None:
        """One flag per option. No argparse default and no argparse type: a flag not given is
        absent from the namespace (so the file and the environment can fill it in), and a
        given one is parsed by `resolve` like a value from anywhere else. `common`: the
        argument group that the `common` options go to (a new user's first screen of help)
        instead of their own group."""
        groups: dict[str, Any] = {}
        for opt in self.options:
            group = COMMON if opt.common and common is not None else opt.group
            if group == COMMON:
                groups[COMMON] = common
            elif group not in groups:
                groups[group] = parser.add_argument_group(group) if group else parser
            kw: dict[str, Any] = {"dest": opt.dest, "default": argparse.SUPPRESS}
            kw["help"] = argparse.SUPPRESS if opt.hidden else self._help(opt)
            if opt.switch:
                kw["action"] = "store_const"
                kw["const"] = "true"
            else:
                choices = "|".join(opt.choices) if opt.choices else None
                kw["metavar"] = opt.metavar or choices or opt.key.replace("-", "_").upper()
            groups[group].add_argument(opt.flag, **kw)

    def _help(self, opt: Option) -> str:
        text = opt.help.replace("%", "%%")
        if opt.switch or not opt.path:
            return text
        default = opt.text_of(self.defaults(opt.path))
        if default == "" or opt.secret:
            return text
        return f"{text} (default: {default.replace('%', '%%')})"

    # --- the layers ----------------------------------------------------------------------

    def resolve(
        self,
        args: argparse.Namespace,
        env: Mapping[str, str] | None = None,
        file: str | None = None,
    ) -> Resolved:
        """Defaults, then the file, then the environment, then the flags given."""
        env = os.environ if env is None else env
        out = Resolved()
        for opt in self.options:
            out.set(opt, self.defaults(opt.path) if opt.path else None, DEFAULT)
        if file is not None:
            for key, value in self.load_file(file).items():
                out.set(self.by_key[key], value, file)
        for opt in self.options:
            if opt.env in env:
                out.set(opt, parsed(opt.from_text, env[opt.env], f"${opt.env}"), f"${opt.env}")
        for opt in self.options:
            if hasattr(args, opt.dest):
                text = getattr(args, opt.dest)
                out.set(opt, parsed(opt.from_text, text, opt.flag), opt.flag)
        return out

    def load_file(self, path: str) -> dict[str, Any]:
        """A TOML file of `key = value` lines: {key: the field's value}."""
        try:
            with open(path, "rb") as f:
                data = tomllib.load(f)
        except OSError as exc:
            raise ConfigError(f"--config {path}: cannot read: {exc.strerror or exc}") from None
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError(f"--config {path}: not valid TOML: {exc}") from None
        return self.load_table(data, path)

    def load_table(
        self, data: Mapping[str, Any], where: str, exclude: Iterable[str] = ()
    ) -> dict[str, Any]:
        """{key: the field's value} of a table of options (a config file, or a chaos scenario's
        [node]); an unknown key is an error naming the nearest valid one. `exclude`: keys this
        table may not set (named as such, not as unknown)."""
        excluded = set(exclude)
        out: dict[str, Any] = {}
        for raw_key, value in data.items():
            key = raw_key.replace("_", "-")
            if key in excluded:
                raise ConfigError(f"{where}: '{raw_key}' cannot be set here")
            opt = self.by_key.get(key)
            if opt is None or opt.hidden:
                raise ConfigError(f"{where}: unknown key '{raw_key}'{self.nearest(key, excluded)}")
            if key in out:
                raise ConfigError(f"{where}: '{raw_key}' is set twice")
            out[key] = parsed(opt.from_toml, value, f"{where}: {raw_key}")
        return out

    def check_env(self, env: Mapping[str, str], others: Iterable[str] = ()) -> None:
        """Raise ConfigError for a `SWARMNODE_*` variable that is neither an option's nor one
        of `others` (the project's variables that are not options): a misspelt variable would
        otherwise be ignored without a word, as a misspelt file key is not."""
        known = {o.env for o in self.options} | set(others)
        # compared without the prefix, which every name shares and would make all look close
        valid = sorted({o.env for o in self.options if not o.hidden} | set(others))
        tails = [v.removeprefix(ENV_PREFIX) for v in valid]
        for name in sorted(env):
            if name.startswith(ENV_PREFIX) and name not in known:
                tail = name.removeprefix(ENV_PREFIX)
                hint = did_you_mean(tail, tails, prefix=f"${ENV_PREFIX}")
                raise ConfigError(f"${name}: no such setting{hint}")

    def nearest(self, key: str, excluded: Iterable[str] = ()) -> str:
        """The hint (`did_you_mean`) for the valid key nearest to `key`, or ""."""
        valid = [o.key for o in self.options if not o.hidden and o.key not in set(excluded)]
        return did_you_mean(key, valid)

    # --- showing -------------------------------------------------------------------------

    def describe(self, resolved: Resolved) -> str:
        """The effective configuration as a TOML file (usable as `--config`), each line with
        where its value came from. Unset values are commented out; secrets are masked."""
        width = max(len(o.key) for o in self.options)
        lines = ["# the effective configuration; after each value, where it came from"]
        for opt in self.options:
            if opt.hidden:
                continue
            value = resolved.values[opt.key]
            if value is None:
                line = f"# {opt.key:<{width}} = (unset)"
            elif opt.secret and value:
                line = f"# {opt.key:<{width}} = (set, not shown)"
            else:
                line = f"  {opt.key:<{width}} = {opt.toml_of(value)}"
            lines.append(f"{line:<{width + 32}} # {resolved.sources[opt.key]}")
        return "\n".join(lines)


def parsed(parse: Callable[[Any], Any], value: Any, where: str) -> Any:
    """`parse(value)`, its error naming where the value came from (`--lr`, `$SWARMNODE_LR`,
    `peer.toml: lr`)."""
    try:
        return parse(value)
    except ConfigError as exc:
        raise ConfigError(f"{where}: {exc}") from None


def _python(value: Any) -> str:
    if isinstance(value, str | int | float | bool | list | tuple) or value is None:
        return repr(value)
    return f"a {type(value).__name__}"


def _toml(value: Any) -> str:
    if isinstance(value, Mapping):
        return "a table"
    if isinstance(value, list):
        return "a list"
    return repr(value)
