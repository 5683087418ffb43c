"""`MixAccumulator`: received models waiting for the training thread, folded into one buffer.

An exchange ends with x <- (1 - w) x + w y, applied between two training steps. Queuing each
(y, w) until then keeps every received model alive for up to a step: a peer with multi-second
steps (or a throttled one) that many peers push to would hold one 100 MB buffer per push, and
memory would grow with the swarm. Instead each arriving model is folded at once into

    x <- s * x + acc        (s = 1, acc = 0 when nothing is pending)

by mix(y, w):  s <- (1 - w) s,  acc <- (1 - w) acc + w y  — which is exactly the composition of
the queued mixes in arrival order. Memory is one extra model, allocated once and reused, and the
received buffer is freed as soon as it is folded in. The training thread calls `apply_to(x)`
between two steps. Each fold and the apply are one pass (`axpby`: x <- a x + b y in NumKong's
`blend`), no temporaries; numpy took three passes for a fold onto a pending one, two for
the apply.
"""

from __future__ import annotations

import functools
import threading
from typing import Any

import numpy as np


@functools.cache
def _nk() -> Any:
    import numkong  # a dependency (kernels/compress.py's codecs); imported on first use

    return numkong


def axpby(x: Any, y: Any, a: float, b: float) -> None:
    """x <- a x + b y in place: one pass (NumKong's `blend`, GIL released) for contiguous
    float32 numpy vectors, where numpy takes two or three and a temporary for b y."""
    if (
        type(x) is np.ndarray
        and type(y) is np.ndarray
        and x.dtype == y.dtype == np.float32
        and x.flags.c_contiguous
        and y.flags.c_contiguous
    ):
        _nk().blend(x, y, alpha=float(a), beta=float(b), out=x)
        return
    if a != 1.0:
        x *= a
    x += y * y.dtype.type(b) if b != 1.0 else y


class MixAccumulator:
    """Thread-safe: `add` from any thread, `apply_to` from the thread that owns `x`."""

    def __init__(self, xp: Any, size: int) -> None:
        self._xp = xp
        self._size = size
        self._lock = threading.Lock()
        self._acc: Any = None  # allocated at the first mix, then reused
        self._scale = 1.0
        self._pending = False
        # who pushed the models pending (node/train/mixing/collapse.py)
        self._sources: set[str] = set()
        self.folded = 0  # mixes folded in since the start (for tests and metrics)

    @property
    def pending(self) -> bool:
        return self._pending

    def add(
        self, other: Any, weight: float, source: str = "", *, x: Any = None, moved: Any = None
    ) -> None:
        """Fold x <- (1 - weight) x + weight * other into the pending update; `source`: the
        peer that pushed `other` ("": a round's own mix). With `moved` (a round's
        `swarmnode.gossip.exchange.types.Moved`) and `x` (the model, its update lock held by
        the caller), the move this fold makes is added to `moved` (`_count_move`)."""
        if not 0.0 < weight <= 1.0:
            raise ValueError(f"mix weight must be in (0, 1], got {weight}")
        xp = self._xp
        y = xp.asarray(other, dtype=xp.float32).reshape(-1)
        if y.shape[0] != self._size:
            raise ValueError(f"mix of {y.shape[0]} values into a model of {self._size}")
        with self._lock:
            if moved is not None and x is not None:
                self._count_move(y, weight, x, moved)
            if self._acc is None:
                self._acc = xp.empty(self._size, dtype=xp.float32)
            if not self._pending:
                xp.multiply(y, weight, out=self._acc)
            elif weight < 1.0:  # acc <- (1 - w) acc + w y, in place, one pass
                axpby(self._acc, y, 1.0 - weight, weight)
            else:
                self._acc[...] = y
            self._scale *= 1.0 - weight
            self._pending = True
            self.folded += 1
            if source:
                self._sources.add(source)

    def _count_move(self, y: Any, weight: float, x: Any, moved: Any) -> None:
        """moved += w (y - v), v = s x + acc: the model as it will stand once what is pending
        lands, which is what this fold moves (under `_lock`). Counted against x alone, a
        burst of pushes folded before the first of them landed was counted as if each moved
        the model from where it stood before all of them: the delta rule then took out more
        than the pushes had moved, and pushed the peer away from its pushers every round
        (scripts/bench/learning/inflight.py, `race`: 10-30 points on a label-skewed task)."""
        xp = self._xp
        if self._pending:
            v = xp.multiply(x.reshape(-1), self._scale, dtype=xp.float32)
            v += self._acc
        else:
            v = x.reshape(-1)
        if xp is not np:  # the round's sum of moves lives on the host
            y, v = y.get(), v.get()
        moved.add(y, v, weight)

    def take_sources(self) -> set[str]:
        """Who pushed the models pending now (and forget them: they are about to be applied)."""
        with self._lock:
            out, self._sources = self._sources, set()
            return out

    def nudge(self, delta: Any, weight: float) -> None:
        """Fold x <- x + weight * delta into the pending update (a compressed exchange's gossip
        step on the pair's shared copies, `swarmnode.gossip.exchange.compressed`): acc <- acc + w d."""
        if not 0.0 < weight <= 1.0:
            raise ValueError(f"nudge weight must be in (0, 1], got {weight}")
        xp = self._xp
        d = xp.asarray(delta, dtype=xp.float32).reshape(-1)
        if d.shape[0] != self._size:
            raise ValueError(f"nudge of {d.shape[0]} values into a model of {self._size}")
        with self._lock:
            if self._acc is None:
                self._acc = xp.empty(self._size, dtype=xp.float32)
            if not self._pending:
                xp.multiply(d, weight, out=self._acc)
                self._scale = 1.0
            else:
                axpby(self._acc, d, 1.0, weight)  # acc <- acc + w d, no temporary
            self._pending = True
            self.folded += 1

    def apply_to(self, x: Any) -> bool:
        """x <- s x + acc, in place (the layers hold views into x); True if anything was pending."""
        with self._lock:
            if not self._pending:
                return False
            axpby(x, self._acc.astype(x.dtype, copy=False), self._scale, 1.0)  # one pass
            self._scale, self._pending = 1.0, False
            return True

    def discard(self) -> None:
        """Drop whatever is pending (the model is being replaced wholesale: a state sync)."""
        with self._lock:
            self._scale, self._pending = 1.0, False
            self._sources = set()


class OuterStep:
    """DiLoCo-style outer step on the mixed model (Douillard et al. 2023, "DiLoCo").

    Each exchange round of this peer ends with the mean of several peers' models. Their progress
    since this peer's previous round, d = anchor - x (the "outer gradient", a mean over the
    peers' local steps, so over k + 1 times the samples of a local step), is applied with
    Nesterov momentum:

        m <- beta m + d;   x <- anchor - lr (d + beta m);   anchor <- x

    lr = 1, beta = 0 is plain averaging. Why: a plain average of N peers' local steps moves the
    model as far as *one* peer's steps would, with N times the samples behind it; the measured
    effect (scripts/sim/swarm.py) is a swarm that learns like one peer with an N times larger
    batch at an unscaled learning rate — below the single peer. The momentum turns the extra
    samples into progress. Memory: three extra copies of the model (anchor, momentum, scratch),
    allocated at the first step (never with the outer step off). The first step only sets the
    anchor. The training thread owns it (no lock of its own).
    """

    def __init__(self, xp: Any) -> None:
        self._xp = xp
        self._anchor: Any = None
        self._m: Any = None
        self._d: Any = None
        self._has_anchor = False
        self.steps = 0

    def forget(self) -> None:
        """The model was replaced (a state sync): the next step starts from it, no momentum."""
        self._has_anchor = False

    def back(self) -> np.ndarray | None:
        """A host copy of the momentum m (it points back, from the model to where it was: the
        heading `gossip.robust.heading` bounds pulls against), or None before any progress."""
        if not self._has_anchor or self.steps == 0:
            return None
        m = self._m.get() if hasattr(self._m, "get") else self._m  # cupy: to the host
        return np.array(m, dtype=np.float32, copy=True)

    def reset(self, x: Any) -> None:
        """Start from x with no momentum."""
        xp = self._xp
        self._has_anchor = True
        if self._anchor is None:
            self._anchor, self._m, self._d = (xp.empty_like(x) for _ in range(3))
        self._anchor[...] = x
        self._m[...] = 0

    def apply(self, x: Any, lr: float, beta: float) -> None:
        """The outer step, in place on x (the layers hold views into it)."""
        if not self._has_anchor:
            self.reset(x)
            return
        xp, a, m, d = self._xp, self._anchor, self._m, self._d
        xp.subtract(a, x, out=d)
        m *= beta
        m += d
        xp.multiply(m, beta, out=x)  # x is free scratch: its value is in d and a
        x += d
        x *= -lr
        x += a
        a[...] = x
        self.steps += 1
