"""What a peer installs in itself to misbehave on purpose: fault specs, the faulty transport, partitions, byzantine behaviours."""

from swarmnode.fault.inject.byzantine import Behaviour, ByzantineError, parse_byzantine
from swarmnode.fault.inject.spec import (
    FaultConfig,
    FaultSpecError,
    make_partition,
    parse_fault_spec,
)
from swarmnode.fault.inject.transport import FaultyTransport

__all__ = [
    "Behaviour",
    "ByzantineError",
    "FaultConfig",
    "FaultSpecError",
    "FaultyTransport",
    "make_partition",
    "parse_byzantine",
    "parse_fault_spec",
]
