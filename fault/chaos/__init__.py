"""What drives peer processes from outside: chaos scenarios, their runner, assertions and report."""

from swarmnode.fault.chaos.errors import ChaosError, ScenarioError
from swarmnode.fault.chaos.runner import ChaosRunner, RunOutcome
from swarmnode.fault.chaos.scenario import Scenario, load_scenario, parse_scenario_text

__all__ = [
    "ChaosError",
    "ChaosRunner",
    "RunOutcome",
    "Scenario",
    "ScenarioError",
    "load_scenario",
    "parse_scenario_text",
]
