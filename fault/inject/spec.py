"""Transport fault settings: the `FaultConfig` value, the `--fault` grammar, and the msgpack map.

Grammar (comma-separated `key=value`, whitespace ignored, `""` or `none` means no faults):

    drop=P            drop a request with probability P (`0.1` or `10%`)
    drop_mode=MODE    what a drop looks like to the caller: `timeout` (default: it waits out its
                      deadline, like a lost packet) or `refuse` (PeerUnreachable at once)
    delay=DURATION    added one-way latency before the request is sent (`50ms`, `0.2s`)
    jitter=DURATION   the delay varies uniformly in [delay - jitter, delay + jitter], floored at 0
    duplicate=P       send the request twice; the second answer is discarded
    corrupt=P         flip 1-4 random bytes of the request body or of the response body
    bandwidth=RATE    cap on bytes per second each way (`500KB/s`, `10MB/s`, `1MiB/s`; bytes,
                      K/M/G decimal, Ki/Mi/Gi binary)
    partition=GROUPS  `a:7001+a:7002|a:7003`: groups split by `|`, members by `+`; unlisted
                      addresses form one more group; requests across groups fail PeerUnreachable

Units are fixed in `FaultConfig` (seconds, bytes per second) so the runtime map of the admin
route (`FaultConfig.from_dict`) can carry plain numbers; it also takes the spec strings above.
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from swarmnode.fault.inject.partition import Partition, format_partition
from swarmnode.kernels.errors import SwarmnodeError

DROP_MODES = ("timeout", "refuse")

_NUMBER = r"[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?"
_DURATION_RE = re.compile(rf"({_NUMBER})\s*(ms|s)", re.IGNORECASE)
_RATE_RE = re.compile(rf"({_NUMBER})\s*([kmg]i?)?b/s", re.IGNORECASE)
_PERCENT_RE = re.compile(rf"({_NUMBER})\s*%")
_RATE_PREFIX = {
    "": 1.0,
    "k": 1e3,
    "m": 1e6,
    "g": 1e9,
    "ki": 1024.0,
    "mi": 1024.0**2,
    "gi": 1024.0**3,
}


class FaultSpecError(SwarmnodeError, ValueError):
    """A `--fault` / `--byzantine` spec or a runtime fault map is invalid (one-line message)."""


class _Invalid(Exception):
    """Internal: a value failed to parse; the caller prefixes `key=value: `."""


@dataclasses.dataclass(frozen=True)
class FaultConfig:
    """Which faults a `FaultyTransport` injects. All-zero (the default) injects nothing.

    Durations are seconds, `bandwidth` is bytes per second (0 = no cap). Construction
    validates every field, so a `FaultConfig` that exists is a sane one.
    """

    drop: float = 0.0
    drop_mode: str = "timeout"
    delay: float = 0.0
    jitter: float = 0.0
    duplicate: float = 0.0
    corrupt: float = 0.0
    bandwidth: float = 0.0
    partition: Partition = ()

    def __post_init__(self) -> None:
        for key in ("drop", "duplicate", "corrupt"):
            _check_number(key, getattr(self, key), lo=0.0, hi=1.0, what="probability")
        for key in ("delay", "jitter"):
            _check_number(key, getattr(self, key), lo=0.0, hi=math.inf, what="duration")
        _check_number("bandwidth", self.bandwidth, lo=0.0, hi=math.inf, what="rate")
        if self.drop_mode not in DROP_MODES:
            raise FaultSpecError(
                f"drop_mode={self.drop_mode}: must be one of {', '.join(DROP_MODES)}"
            )
        # Normalise so that equal partitions compare equal whatever container they came in.
        object.__setattr__(self, "partition", make_partition(self.partition))

    @property
    def active(self) -> bool:
        """True when this config injects any fault at all."""
        return self != FaultConfig(drop_mode=self.drop_mode)

    def to_dict(self) -> dict[str, Any]:
        """A msgpack-friendly map (plain floats, lists); `from_dict` reads it back exactly."""
        out: dict[str, Any] = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        out["partition"] = [sorted(group) for group in self.partition]
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> FaultConfig:
        """Build from a map (the admin route's body). Missing keys take defaults; values are
        numbers in config units or spec strings (`"50ms"`); unknown keys are errors."""
        if not isinstance(data, Mapping):
            raise FaultSpecError(f"fault config must be a map, got {type(data).__name__}")
        kwargs: dict[str, Any] = {}
        for key, value in data.items():
            if key not in _FIELD_PARSERS:
                raise FaultSpecError(f"{key}: unknown fault (known: {', '.join(KNOWN_KEYS)})")
            kwargs[key] = _value_from_map(key, value)
        return cls(**kwargs)

    def to_spec(self) -> str:
        """The `--fault` text for this config (non-default fields only); parses back equal."""
        items = []
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if value == f.default:
                continue
            if f.name in ("delay", "jitter"):
                items.append(f"{f.name}={value!r}s")
            elif f.name == "bandwidth":
                items.append(f"bandwidth={value!r}B/s")
            elif f.name == "partition":
                items.append(f"partition={format_partition(value)}")
            else:
                items.append(f"{f.name}={value}")
        return ",".join(items) or "none"


def parse_fault_spec(text: str) -> FaultConfig:
    """Parse a `--fault` spec such as `drop=0.1,delay=50ms`; raise `FaultSpecError` on bad input."""
    text = text.strip()
    if text.lower() in ("", "none"):
        return FaultConfig()
    kwargs: dict[str, Any] = {}
    for item in text.split(","):
        item = item.strip()
        if not item:
            raise FaultSpecError(f"fault spec {text!r}: empty item")
        key, sep, value = item.partition("=")
        key, value = key.strip(), value.strip()
        if not sep:
            raise FaultSpecError(f"{item}: expected key=value")
        if key not in _FIELD_PARSERS:
            raise FaultSpecError(f"{item}: unknown fault (known: {', '.join(KNOWN_KEYS)})")
        if key in kwargs:
            raise FaultSpecError(f"{item}: {key} given twice")
        kwargs[key] = _parse_value(key, value)
    return FaultConfig(**kwargs)


def make_partition(groups: Iterable[Iterable[str]]) -> Partition:
    """Validate partition groups (lists of addresses) into disjoint frozensets."""
    if isinstance(groups, (str, bytes)):
        raise FaultSpecError("partition: expected a list of groups, not a string")
    seen: set[str] = set()
    result: list[frozenset[str]] = []
    for group in groups:
        if isinstance(group, (str, bytes)) or not isinstance(group, Iterable):
            # A bare string would silently be split into characters: refuse it.
            raise FaultSpecError(f"partition: group {group!r} must be a list of addresses")
        members = list(group)
        if not members:
            raise FaultSpecError("partition: empty group")
        for addr in members:
            if not isinstance(addr, str) or not addr or any(c.isspace() for c in addr):
                raise FaultSpecError(f"partition: bad address {addr!r}")
            if addr in seen:
                raise FaultSpecError(f"partition: address {addr} is in two groups")
            seen.add(addr)
        result.append(frozenset(members))
    return tuple(result)


def _check_number(key: str, value: Any, *, lo: float, hi: float, what: str) -> None:
    # bool is an int subclass; `drop=True` is a mistake, not a probability of 1.
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise FaultSpecError(f"{key}={value!r}: {what} must be a number")
    if not math.isfinite(value) or not lo <= value <= hi:
        bound = f"in [{lo:g}, {hi:g}]" if math.isfinite(hi) else f"finite and >= {lo:g}"
        raise FaultSpecError(f"{key}={value!r}: {what} must be {bound}")


def _parse_value(key: str, text: str) -> Any:
    try:
        return _FIELD_PARSERS[key](text)
    except _Invalid as exc:
        raise FaultSpecError(f"{key}={text}: {exc}") from None


def _value_from_map(key: str, value: Any) -> Any:
    if isinstance(value, str):
        return _parse_value(key, value)
    if key == "partition":
        return make_partition(value)
    if key == "bandwidth" and value is None:
        return 0.0
    return value  # numbers are checked by FaultConfig itself


def _parse_probability(text: str) -> float:
    match = _PERCENT_RE.fullmatch(text)
    value = float(match.group(1)) / 100.0 if match else _plain_number(text)
    if not 0.0 <= value <= 1.0:
        raise _Invalid("probability must be in [0, 1]")
    return value


def _parse_duration(text: str) -> float:
    match = _DURATION_RE.fullmatch(text)
    if not match:
        raise _Invalid("expected a duration such as 50ms or 0.5s")
    scale = 1e-3 if match.group(2).lower() == "ms" else 1.0
    value = float(match.group(1)) * scale
    if not (math.isfinite(value) and value >= 0):
        raise _Invalid("duration must be finite and >= 0")
    return value


def _parse_rate(text: str) -> float:
    match = _RATE_RE.fullmatch(text)
    if not match:
        raise _Invalid("expected a rate such as 500KB/s or 10MB/s")
    value = float(match.group(1)) * _RATE_PREFIX[(match.group(2) or "").lower()]
    if not (math.isfinite(value) and value > 0):
        raise _Invalid("rate must be finite and > 0 (leave bandwidth out for no cap)")
    return value


def _parse_drop_mode(text: str) -> str:
    if text not in DROP_MODES:
        raise _Invalid(f"must be one of {', '.join(DROP_MODES)}")
    return text


def _parse_partition(text: str) -> Partition:
    if not text:
        raise _Invalid("expected groups such as a:7001+a:7002|a:7003")
    try:
        return make_partition(
            [member.strip() for member in group.split("+")] for group in text.split("|")
        )
    except FaultSpecError as exc:
        raise _Invalid(str(exc).removeprefix("partition: ")) from None


def _plain_number(text: str) -> float:
    if not re.fullmatch(_NUMBER, text):
        raise _Invalid("expected a number")
    return float(text)


_FIELD_PARSERS: dict[str, Callable[[str], Any]] = {
    "drop": _parse_probability,
    "drop_mode": _parse_drop_mode,
    "delay": _parse_duration,
    "jitter": _parse_duration,
    "duplicate": _parse_probability,
    "corrupt": _parse_probability,
    "bandwidth": _parse_rate,
    "partition": _parse_partition,
}
KNOWN_KEYS = tuple(_FIELD_PARSERS)
