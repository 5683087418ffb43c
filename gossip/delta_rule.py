"""The average round's delta rule: a round's mix keeps the steps trained while it was in flight.

Training goes on during an exchange round (`Exchanger._average_round`), so by the time my
group's answers y land, my model is x = sent + g + m: `sent` what I pushed, g the steps trained
since, m what pushes from other peers moved x meanwhile (`Exchanger._pushed_in`). The plain rule

    x <- (1 - w) x + w mean(y)

scales g by 1 - w, a quarter in a group of 3: on slow links and busy hosts, where a round spans
many steps, most of that training is thrown away, and x is pulled back towards models older than
itself. The delta rule averages x without g and carries g over whole,
x <- (1 - w) x + w (mean(y) + g), which is

    x <- x + w (mean(y) - sent - m).

This is hivemind's `delta_rule_averaging` (Ryabinin et al.), with the pushes counted: hivemind's
averaging groups are exclusive, ours are not. Without m, two peers that push to each other at
once would each add the other's model twice and swap instead of meeting halfway
(tests/gossip/test_exchange_delta_rule.py). Either way the swarm's mean is preserved however long
the round took. Figures: docs/benchmarks.md ("delta rule").
"""

from __future__ import annotations

import numpy as np
from swarmnode.gossip import covered, wire


def step(answers: list[np.ndarray], sent: np.ndarray, moved: list[np.ndarray]) -> np.ndarray:
    """mean(answers) - sent - sum(moved): the update that `nudge` applies with the round's w."""
    delta = mean_rows(answers) if len(answers) > 1 else answers[0].astype(np.float32)  # a copy
    delta -= sent
    for m in moved:
        delta -= m
    return delta


def moved_by(clipped: np.ndarray, own: np.ndarray, weight: float) -> np.ndarray:
    """How far x <- (1 - w) x + w clipped moves a model that stands at `own`."""
    moved = clipped - own
    moved *= np.float32(weight)
    return moved


def own_frame_params(frame: memoryview) -> np.ndarray:
    """The raw vector of a frame this peer built itself: a zero-copy view, no checksum pass."""
    covered.mark(frame)
    return wire.decode_params(frame)[1]


def mean_rows(rows: list[np.ndarray]) -> np.ndarray:
    return np.mean(np.stack(rows), axis=0, dtype=np.float64).astype(np.float32)
