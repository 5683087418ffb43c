"""What drives peer processes from outside: chaos scenarios, their runner, assertions and report."""

from swarmnode.fault.chaos.errors import ChaosError, ScenarioError
from swarmnode.fault.chaos.plot import PLOT_NAME, PlotUnavailable, write_plot
from swarmnode.fault.chaos.report import final_table, write_report
from swarmnode.fault.chaos.runner import ChaosRunner, RunOutcome
from swarmnode.fault.chaos.scenario import Scenario, load_scenario, parse_scenario_text

__all__ = [
    "PLOT_NAME",
    "ChaosError",
    "ChaosRunner",
    "PlotUnavailable",
    "RunOutcome",
    "Scenario",
    "ScenarioError",
    "final_table",
    "load_scenario",
    "parse_scenario_text",
    "write_plot",
    "write_report",
]
