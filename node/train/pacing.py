"""`Pacer`: how long a training thread pauses after a step (tests, chaos, benchmarks).

Three knobs, combinable: a fixed `delay_s` after each step; `slowdown`, a multiple of the
measured step (a straggler: (slowdown - 1) x step time of sleep); and `step_s`, a fixed
simulated step time (the step plus its pause take at least that long). `step_s` paces a peer
like a compute-bound GPU peer whatever else loads the machine: `slowdown` multiplies the
measured step, so on a shared box other processes' CPU use inflates the pace too, and a swarm
of peers looked slower per step than one peer alone for that reason only.
"""

from __future__ import annotations

import threading

MAX_STEP_S = 60.0


class Pacer:
    """Set from any thread; `pause` runs on the training thread and wakes early on `wake`."""

    def __init__(self, wake: threading.Event) -> None:
        self._wake = wake
        self.delay_s = 0.0
        self.slowdown = 1.0
        self.step_s = 0.0

    def set(self, delay_s: float = 0.0, slowdown: float = 1.0, step_s: float = 0.0) -> None:
        if not (delay_s >= 0 and slowdown >= 1 and 0 <= step_s <= MAX_STEP_S):
            raise ValueError(f"need delay_s >= 0, slowdown >= 1 and 0 <= step_s <= {MAX_STEP_S:g}")
        self.delay_s, self.slowdown, self.step_s = float(delay_s), float(slowdown), float(step_s)
        self._wake.set()  # a pause computed from the old setting must not outlive it

    def pause_for(self, took_s: float) -> float:
        """Seconds to sleep after a step that took `took_s`."""
        return max(self.delay_s + (self.slowdown - 1.0) * took_s, self.step_s - took_s)

    def pause(self, took_s: float) -> None:
        pause = self.pause_for(took_s)
        if pause > 0:
            self._wake.wait(pause)  # wakes at once on stop() or a new setting
            self._wake.clear()
