"""`MixAccumulator`: received models waiting for the training thread, folded into one buffer.

An exchange ends with x <- (1 - w) x + w y, applied between two training steps. Queuing each
(y, w) until then keeps every received model alive for up to a step: a peer with multi-second
steps (or a throttled one) that many peers push to would hold one 100 MB buffer per push, and
memory would grow with the swarm. Instead each arriving model is folded at once into

    x <- s * x + acc        (s = 1, acc = 0 when nothing is pending)

by mix(y, w):  s <- (1 - w) s,  acc <- (1 - w) acc + w y  — which is exactly the composition of
the queued mixes in arrival order. Memory is one extra model, allocated once and reused, and the
received buffer is freed as soon as it is folded in. The training thread calls `apply_to(x)`
between two steps (two passes over x, no temporaries).
"""

from __future__ import annotations

import threading
from typing import Any


class MixAccumulator:
    """Thread-safe: `add` from any thread, `apply_to` from the thread that owns `x`."""

    def __init__(self, xp: Any, size: int) -> None:
        self._xp = xp
        self._size = size
        self._lock = threading.Lock()
        self._acc: Any = None  # allocated at the first mix, then reused
        self._scale = 1.0
        self._pending = False
        self.folded = 0  # mixes folded in since the start (for tests and metrics)

    @property
    def pending(self) -> bool:
        return self._pending

    def add(self, other: Any, weight: float) -> None:
        """Fold x <- (1 - weight) x + weight * other into the pending update."""
        if not 0.0 < weight <= 1.0:
            raise ValueError(f"mix weight must be in (0, 1], got {weight}")
        xp = self._xp
        y = xp.asarray(other, dtype=xp.float32).reshape(-1)
        if y.shape[0] != self._size:
            raise ValueError(f"mix of {y.shape[0]} values into a model of {self._size}")
        with self._lock:
            if self._acc is None:
                self._acc = xp.empty(self._size, dtype=xp.float32)
            if not self._pending:
                xp.multiply(y, weight, out=self._acc)
            else:  # acc <- (1 - w) acc + w y, in place: ((1 - w) / w * acc + y) * w
                if weight < 1.0:
                    self._acc *= (1.0 - weight) / weight
                    self._acc += y
                    self._acc *= weight
                else:
                    self._acc[...] = y
            self._scale *= 1.0 - weight
            self._pending = True
            self.folded += 1

    def apply_to(self, x: Any) -> bool:
        """x <- s x + acc, in place (the layers hold views into x); True if anything was pending."""
        with self._lock:
            if not self._pending:
                return False
            x *= self._scale
            x += self._acc.astype(x.dtype, copy=False)
            self._scale, self._pending = 1.0, False
            return True

    def discard(self) -> None:
        """Drop whatever is pending (the model is being replaced wholesale: a state sync)."""
        with self._lock:
            self._scale, self._pending = 1.0, False
