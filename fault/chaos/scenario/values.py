"""Readers for the values of a scenario file: each checks one key and names it in a one-line
`ScenarioError` (the scenario room's schema and events use them)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from swarmnode.fault.chaos.errors import ScenarioError
from swarmnode.kernels.errors import did_you_mean


def no_unknown(raw: Mapping[str, Any], known: set[str], where: str) -> None:
    for key in raw:
        if key not in known:
            hint = did_you_mean(str(key), known)
            raise ScenarioError(
                f"{where}: unknown key '{key}'{hint} (known: {', '.join(sorted(known))})"
            )


def table(data: Mapping[str, Any], key: str, required: bool = False) -> Mapping[str, Any]:
    value = data.get(key)
    if value is None:
        if required:
            raise ScenarioError(f"missing [{key}] table")
        return {}
    if not isinstance(value, Mapping):
        raise ScenarioError(f"'{key}' must be a table ([{key}])")
    return value


def number(
    raw: Mapping[str, Any],
    key: str,
    where: str,
    *,
    default: float | None = None,
    required: bool = False,
    lo: float = -math.inf,
    hi: float = math.inf,
    open_lo: bool = False,
) -> float:
    if key not in raw:
        if required:
            raise ScenarioError(f"{where} lacks '{key}'")
        assert default is not None
        return default
    value = raw[key]
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ScenarioError(f"{where}: '{key}' must be a number, got {value!r}")
    if value < lo or value > hi or (open_lo and value == lo):
        low = f"({lo:g}" if open_lo else f"[{lo:g}"
        raise ScenarioError(f"{where}: '{key}' = {value:g} is outside {low}, {hi:g}]")
    return float(value)


def string(
    raw: Mapping[str, Any], key: str, where: str, *, default: str = "", required: bool = False
) -> str:
    if key not in raw:
        if required:
            raise ScenarioError(f"{where} lacks '{key}'")
        return default
    value = raw[key]
    if not isinstance(value, str):
        raise ScenarioError(f"{where}: '{key}' must be a string, got {value!r}")
    return value


def peer_name(value: Any, names: set[str], where: str) -> str:
    if not isinstance(value, str):
        raise ScenarioError(f"{where}: needs 'peer' = the name of a [[peer]]")
    if value not in names:
        raise ScenarioError(
            f"{where}: unknown peer name {value!r} (peers: {', '.join(sorted(names))})"
        )
    return value


def groups_value(value: Any, names: set[str], where: str) -> tuple[tuple[str, ...], ...]:
    if (
        not isinstance(value, list)
        or not value
        or not all(isinstance(g, list) and g for g in value)
    ):
        raise ScenarioError(f"{where}: 'groups' must be a list of non-empty lists of peer names")
    seen: set[str] = set()
    for group in value:
        for name in group:
            peer_name(name, names, where)
            if name in seen:
                raise ScenarioError(f"{where}: peer {name!r} is in two partition groups")
            seen.add(name)
    return tuple(tuple(g) for g in value)
