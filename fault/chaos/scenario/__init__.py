"""Chaos scenarios, the room: what a `swarmnode chaos SCENARIO.toml` file says, parsed and checked.

- schema.py: the TOML format (its docstring documents every key), the `Scenario` and `PeerSpec`
  it parses into, `load_scenario` / `parse_scenario_text`, and the peer flags (`flag_argv`,
  `RUNNER_FLAGS`, `NodeCheck`, the hook through which `swarmnode start`'s loader checks them)
- events.py: the `[[event]]` tables (`Event`, the actions) and the timeline's consistency
- values.py: the readers of one key's value, each failing with a one-line `ScenarioError`

Parsing only: the room imports of fault.chaos the errors and the assertions' validation
(assertions.check), never the runner or anything that drives a process.
"""

from swarmnode.fault.chaos.errors import ScenarioError
from swarmnode.fault.chaos.scenario.events import ACTIONS, Event
from swarmnode.fault.chaos.scenario.schema import (
    RUNNER_FLAGS,
    NodeCheck,
    PeerSpec,
    Scenario,
    flag_argv,
    load_scenario,
    parse_scenario_text,
)

__all__ = [
    "ACTIONS",
    "RUNNER_FLAGS",
    "Event",
    "NodeCheck",
    "PeerSpec",
    "Scenario",
    "ScenarioError",
    "flag_argv",
    "load_scenario",
    "parse_scenario_text",
]
