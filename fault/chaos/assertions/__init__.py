"""Scenario assertions: pure checks over the data a chaos run sampled.

Every check reads a `RunRecord` (the per-peer `/v1/status` samples, the model distances and the
executed timeline) and returns one result with the measured value, the threshold and a verdict,
so a unit test can feed it synthetic samples. This is the room's front: `evaluate` runs a
scenario's assertions through `EVALUATORS` (kind -> check). The checks live by family:
accuracy.py (final_accuracy, accuracy_drop, keeps_training, catch_up), swarm.py (membership,
reconverge, merge), exchange.py (exchange_progress, max_wait), hostile.py (member_cap,
victim_alive, exchange_rate, hostile_accepted), control.py (control_accuracy, control_rounds:
the verdicts against the control swarm, which itself is fault/chaos/control.py beside this room);
check.py validates the keys while a scenario is parsed; the shared data is fault/chaos/record.py.
The room never imports the runner (the runner imports it). Kinds and their keys (`[[assert]]`
tables):

    final_accuracy     min (required, 0-1); peers (default: honest peers running at the end);
                       window (s, default 0: the last sample) -- lowest final test accuracy
    accuracy_drop      max_drop (default 0.02); after (event id, default: the first fault);
                       until (event id, default: the end of the run); window (s, default 3);
                       peers (default: honest peers no event targets) -- largest (accuracy
                       before the fault - LOWEST accuracy in [fault, until]) over the survivors;
                       the mean over `window` s before the fault is the reference level
    keeps_training     max_stall (s, default 2 x sample_every + 1); after (event id, default:
                       the first kill/terminate/freeze/partition); until (event id, default: the
                       first restart/join/thaw/heal after it, else the end); peers (default as
                       accuracy_drop) -- longest time a survivor's step counter stood still in
                       [after, until]; a survivor whose counter never moved there fails
    catch_up           within (default 0.05); peers (default: peers restarted or joined late);
                       window (s, default 3) -- largest |acc - median of the other honest peers|;
                       a target counts only with samples taken after its last restart/join/thaw,
                       and must be running and answering at the end (else it fails, saying why)
    membership         within (s, default 10); after (event id, default: every kill/terminate)
                       -- slowest time until every live peer lists the target as dead or left
    reconverge         within (s, default 20); factor (default 1.0); after (heal event id,
                       default the first heal); window (s, default 5); min_growth (default 2.0)
                       -- time after the heal until the max pairwise model distance is back
                       under factor x its level before the partition (needs [scenario]
                       params_every > 0). The split must first have pushed the distance above
                       min_growth x that level: a partition the models never felt shows nothing.
                       The heal + within must end inside the run (reconverge and merge alike)
    merge              within (s, default 30); after (heal event id, default the first heal)
                       -- time after the heal until every peer running then lists every other
                       one (by its current peer id) as alive: the halves' membership merged
    exchange_progress  max_stall (s, default exchange-timeout + 2 x sample_every); peers
                       (default: honest peers not slowed below the rest) -- longest time an
                       honest peer's exchange round counter stood still while it answered
    max_wait           allowance (s, default 0.2); peers (default: honest peers never frozen,
                       killed or slowed below the rest) -- longest single round any of them
                       reported (status `exchange.max_round_s`), against one exchange timeout
                       (`exchange-timeout`) + `allowance`. A round waits on the network for at
                       most one deadline; the allowance covers only the round's own work around
                       that wait (snapshot, encode, decode, mix: a few ms for the digits MLP, the
                       rest is thread scheduling on a shared CPU). The report lists both parts.
    member_cap         max (default 1024, the table's cap); peers (default: honest peers) --
                       the most members any of them listed in one sample
    victim_alive       min_share (default 0.95); peer (default: the forged-records victim, else
                       the attacked peer); after (hostile event id, default the first) -- the
                       lowest share, over the other honest peers, of their samples during the
                       attack that list the victim alive
    exchange_rate      min_ratio (default 0.9); baseline (s, default: the attack's length);
                       after (hostile event id, default the first); peers (default: honest) --
                       exchange rounds applied a second, summed over the peers, during the
                       attack / the mean of the `baseline` seconds before it and after it
                       (after: when the run lasts >= 3 s beyond the attack)
    hostile_accepted   max (default 0); after (hostile event id, default: every attack) -- what
                       the attackers got through by their own count: sybils listed by an honest
                       peer (the most at once), observations showing a forged claim
    control_accuracy   max_drop (default 0.03); at (s, default: the end); window (s, default 3);
                       peers (default: honest here, the control's seat excepted) -- the lowest
                       accuracy of the peers at `at` (each the mean over `window` s) minus the
                       lowest of the same peers in the control run (needs [control])
    control_rounds     min_ratio (default 0.7); from, until (s, default: the first hostile
                       event's actual span, else the whole run); peers (as control_accuracy)
                       -- exchange rounds applied a second, summed over the peers, here / in
                       the control run over the span (needs [control])

Any kind takes `must_fail = true`: the bar is expected to fail ("failed as expected").
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from swarmnode.fault.chaos.assertions.accuracy import (
    accuracy_drop,
    catch_up,
    final_accuracy,
    keeps_training,
)
from swarmnode.fault.chaos.assertions.check import SCHEMAS, validate_assertion
from swarmnode.fault.chaos.assertions.control import control_accuracy, control_rounds
from swarmnode.fault.chaos.assertions.exchange import exchange_progress, max_wait
from swarmnode.fault.chaos.assertions.hostile import (
    exchange_rate,
    hostile_accepted,
    member_cap,
    victim_alive,
)
from swarmnode.fault.chaos.assertions.swarm import membership, merge, reconverge
from swarmnode.fault.chaos.record import Result, RunRecord, ScenarioView, honest_peers

__all__ = ["EVALUATORS", "Result", "RunRecord", "evaluate", "honest_peers", "validate_assertion"]

Evaluator = Callable[[ScenarioView, RunRecord, Mapping[str, Any]], Result]
EVALUATORS: dict[str, Evaluator] = {
    "final_accuracy": final_accuracy,
    "accuracy_drop": accuracy_drop,
    "keeps_training": keeps_training,
    "catch_up": catch_up,
    "membership": membership,
    "reconverge": reconverge,
    "max_wait": max_wait,
    "merge": merge,
    "exchange_progress": exchange_progress,
    "member_cap": member_cap,
    "victim_alive": victim_alive,
    "exchange_rate": exchange_rate,
    "hostile_accepted": hostile_accepted,
    "control_accuracy": control_accuracy,
    "control_rounds": control_rounds,
}
assert EVALUATORS.keys() == SCHEMAS.keys()  # a kind is validated and evaluated, or neither


def evaluate(scenario: ScenarioView, record: RunRecord) -> list[Result]:
    """Every assertion of `scenario` over `record`, in file order."""
    results = []
    for spec in scenario.assertions:
        result = EVALUATORS[spec.kind](scenario, record, spec.params)
        result.must_fail = spec.must_fail
        results.append(result)
    return results
