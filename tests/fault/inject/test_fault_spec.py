"""`--fault` spec parsing, `FaultConfig` validation, and the runtime map round trip."""

from __future__ import annotations

import math

import msgpack
import pytest
from hypothesis import given
from hypothesis import strategies as st
from swarmnode.fault.inject.partition import group_of, is_blocked
from swarmnode.fault.inject.spec import FaultConfig, FaultSpecError, parse_fault_spec
from swarmnode.kernels.errors import SwarmnodeError


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", FaultConfig()),
        ("none", FaultConfig()),
        ("drop=0.1,delay=50ms", FaultConfig(drop=0.1, delay=0.05)),
        ("drop=10%", FaultConfig(drop=0.1)),
        (" drop = 1 , drop_mode = refuse ", FaultConfig(drop=1.0, drop_mode="refuse")),
        ("delay=0.5s,jitter=5ms", FaultConfig(delay=0.5, jitter=0.005)),
        ("delay=2S", FaultConfig(delay=2.0)),
        ("duplicate=0.25,corrupt=1e-2", FaultConfig(duplicate=0.25, corrupt=0.01)),
        ("bandwidth=10MB/s", FaultConfig(bandwidth=10e6)),
        ("bandwidth=500KB/s", FaultConfig(bandwidth=500e3)),
        ("bandwidth=1MiB/s", FaultConfig(bandwidth=1024.0**2)),
        ("bandwidth=64B/s", FaultConfig(bandwidth=64.0)),
        (
            "partition=a:7001+a:7002|a:7003",
            FaultConfig(partition=(frozenset({"a:7001", "a:7002"}), frozenset({"a:7003"}))),
        ),
    ],
)
def test_valid_specs_parse_to_the_expected_config(text: str, expected: FaultConfig) -> None:
    config = parse_fault_spec(text)
    assert config == expected
    for key in ("drop", "delay", "jitter", "bandwidth"):
        assert getattr(config, key) == pytest.approx(getattr(expected, key), rel=1e-12)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("drop=1.5", "drop=1.5: probability must be in [0, 1]"),
        ("drop=-0.1", "drop=-0.1: probability must be in [0, 1]"),
        ("duplicate=200%", "duplicate=200%: probability must be in [0, 1]"),
        ("corrupt=often", "corrupt=often: expected a number"),
        ("drop=nan", "drop=nan: expected a number"),
        ("delay=50", "delay=50: expected a duration such as 50ms or 0.5s"),
        ("delay=5h", "delay=5h: expected a duration"),
        ("jitter=-5ms", "jitter=-5ms: duration must be finite and >= 0"),
        ("delay=1e400s", "delay=1e400s: duration must be finite"),
        ("bandwidth=0MB/s", "bandwidth=0MB/s: rate must be finite and > 0"),
        ("bandwidth=10Mbit", "bandwidth=10Mbit: expected a rate such as 500KB/s"),
        ("drop_mode=maybe", "drop_mode=maybe: must be one of timeout, refuse"),
        ("partition=", "partition=: expected groups"),
        ("partition=a:1+|a:2", "partition=a:1+|a:2: bad address ''"),
        ("partition=a:1|a:1", "partition=a:1|a:1: address a:1 is in two groups"),
        ("slow=2", "slow=2: unknown fault (known: drop, drop_mode, delay"),
        ("drop", "drop: expected key=value"),
        ("drop=0.1,drop=0.2", "drop=0.2: drop given twice"),
        ("drop=0.1,", "empty item"),
    ],
)
def test_invalid_specs_raise_one_line_naming_the_item(text: str, message: str) -> None:
    with pytest.raises(FaultSpecError) as info:
        parse_fault_spec(text)
    text_of_error = str(info.value)
    assert message in text_of_error
    assert "\n" not in text_of_error
    assert isinstance(info.value, SwarmnodeError)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"drop": 1.5}, "drop=1.5: probability must be in [0, 1]"),
        ({"delay": math.nan}, "delay=nan: duration must be finite"),
        ({"bandwidth": -1}, "bandwidth=-1: rate must be finite and >= 0"),
        ({"corrupt": True}, "corrupt=True: probability must be a number"),
        ({"drop_mode": "later"}, "drop_mode=later: must be one of timeout, refuse"),
        ({"partition": "a:1"}, "partition: expected a list of groups"),
        ({"partition": ["a:1"]}, "partition: group 'a:1' must be a list"),
        ({"partition": [[]]}, "partition: empty group"),
    ],
)
def test_direct_construction_is_validated(kwargs: dict, message: str) -> None:
    with pytest.raises(FaultSpecError, match=None) as info:
        FaultConfig(**kwargs)
    assert message in str(info.value)


def test_map_round_trips_through_msgpack() -> None:
    config = parse_fault_spec(
        "drop=0.2,drop_mode=refuse,delay=30ms,jitter=7ms,duplicate=0.05,corrupt=0.01,"
        "bandwidth=2MB/s,partition=h:1+h:2|h:3"
    )
    wire = msgpack.unpackb(msgpack.packb(config.to_dict()), raw=False)
    assert FaultConfig.from_dict(wire) == config
    assert parse_fault_spec(config.to_spec()) == config


def test_from_dict_takes_spec_strings_and_defaults_missing_keys() -> None:
    config = FaultConfig.from_dict({"delay": "50ms", "bandwidth": "1KB/s", "partition": "a|b"})
    assert config == FaultConfig(
        delay=0.05, bandwidth=1000.0, partition=(frozenset({"a"}), frozenset({"b"}))
    )
    assert FaultConfig.from_dict({}) == FaultConfig()
    assert FaultConfig.from_dict({"bandwidth": None}).bandwidth == 0.0


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ([("drop", 0.1)], "fault config must be a map, got list"),
        ({"slow": 2}, "slow: unknown fault"),
        ({"drop": "lots"}, "drop=lots: expected a number"),
        ({"drop": None}, "drop=None: probability must be a number"),
        ({"delay": -1.0}, "delay=-1.0: duration must be finite and >= 0"),
    ],
)
def test_from_dict_rejects_bad_maps(data: object, message: str) -> None:
    with pytest.raises(FaultSpecError) as info:
        FaultConfig.from_dict(data)  # type: ignore[arg-type]
    assert message in str(info.value)


@given(
    drop=st.floats(0, 1),
    delay=st.floats(0, 10),
    jitter=st.floats(0, 1),
    bandwidth=st.floats(1, 1e10),
    mode=st.sampled_from(["timeout", "refuse"]),
)
def test_spec_text_round_trips_exactly(
    drop: float, delay: float, jitter: float, bandwidth: float, mode: str
) -> None:
    config = FaultConfig(drop=drop, delay=delay, jitter=jitter, bandwidth=bandwidth, drop_mode=mode)
    assert parse_fault_spec(config.to_spec()) == config


def test_active_is_false_only_without_faults() -> None:
    assert not FaultConfig().active
    assert not FaultConfig(drop_mode="refuse").active
    assert FaultConfig(jitter=0.001).active
    assert FaultConfig(partition=((frozenset({"a"}),))).active


def test_partition_blocks_across_groups_and_counts_unlisted_as_one_group() -> None:
    partition = parse_fault_spec("partition=a:1+a:2|a:3").partition
    assert group_of(partition, "a:2") == group_of(partition, "a:1")
    assert not is_blocked(partition, "a:1", "a:2")
    assert is_blocked(partition, "a:1", "a:3")
    assert is_blocked(partition, "a:3", "z:9")  # unlisted peers are a group of their own
    assert not is_blocked(partition, "z:8", "z:9")
    assert not is_blocked((), "a:1", "a:3")
