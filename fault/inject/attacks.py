"""The byzantine behaviours themselves, one frozen dataclass per `--byzantine` kind.

What each kind serves, and why updates need a reference point in parameter exchange, is told in
swarmnode.fault.inject.byzantine; this module holds the arithmetic.
"""

from __future__ import annotations

import dataclasses
import math
from statistics import NormalDist
from typing import ClassVar

import numpy as np
from swarmnode.fault.inject.behaviour import (
    Array,
    Behaviour,
    ByzantineError,
    array_module,
    standard_normal,
)
from swarmnode.fault.inject.spec import FaultSpecError
from swarmnode.kernels.errors import ShapeError


@dataclasses.dataclass(frozen=True)
class SignFlip(Behaviour):
    """-scale * own, or with `update=1` the flipped update r - scale * (own - r)."""

    KIND: ClassVar[str] = "sign-flip"
    PARAMS: ClassVar[dict[str, type]] = {"scale": float, "update": int}
    scale: float = 1.0
    update: int = 0  # 1: act on the update since the reference (the node then supplies one)

    def __post_init__(self) -> None:
        check_positive(self.KIND, "scale", self.scale)
        if self.update not in (0, 1):
            raise FaultSpecError(f"sign-flip:update={self.update}: update must be 0 or 1")

    @property
    def wants_reference(self) -> bool:
        return bool(self.update)

    def _poison(self, own, views, rng, ref, xp):
        if ref is None:
            if self.update:
                raise ByzantineError("sign-flip:update=1 needs a reference model")
            return -self.scale * own
        return ref - self.scale * (own - ref)


@dataclasses.dataclass(frozen=True)
class Gaussian(Behaviour):
    KIND: ClassVar[str] = "gaussian"
    PARAMS: ClassVar[dict[str, type]] = {"sigma": float}
    sigma: float = 1.0

    def __post_init__(self) -> None:
        check_positive(self.KIND, "sigma", self.sigma)

    def _poison(self, own, views, rng, ref, xp):
        return own + self.sigma * standard_normal(xp, rng, own.shape)


@dataclasses.dataclass(frozen=True)
class Noise(Behaviour):
    KIND: ClassVar[str] = "noise"
    PARAMS: ClassVar[dict[str, type]] = {"sigma": float}
    sigma: float = 1.0

    def __post_init__(self) -> None:
        check_positive(self.KIND, "sigma", self.sigma)

    def _poison(self, own, views, rng, ref, xp):
        return self.sigma * standard_normal(xp, rng, own.shape)


@dataclasses.dataclass(frozen=True)
class Alie(Behaviour):
    """mean - z * std, coordinate-wise over the honest views (population std, ddof 0).

    With no `z`, z = `alie_z(n, f)`: `n` workers in all, `f` of them colluding. The node fills
    the ones not given from its membership (`with_swarm`: n = live peers + 1, f = the byzantine
    peers it knows + 1). Called without them, f = 1 and n = honest views + f.
    """

    KIND: ClassVar[str] = "alie"
    PARAMS: ClassVar[dict[str, type]] = {"z": float, "n": int, "f": int}
    needs_honest_views: ClassVar[bool] = True
    z: float | None = None
    n: int | None = None
    f: int | None = None

    def __post_init__(self) -> None:
        if self.z is not None and not math.isfinite(self.z):
            raise FaultSpecError(f"alie:z={self.z}: z must be finite")
        f = 1 if self.f is None else self.f
        if f < 1 or (self.n is not None and self.n <= f):
            raise FaultSpecError(f"alie:n={self.n},f={self.f}: need 1 <= f < n")

    def with_swarm(self, n: int, f: int) -> Alie:
        """Counts given in the spec win; the swarm's fill the others."""
        n = n if self.n is None else self.n
        f = f if self.f is None else self.f
        if not 1 <= f < n:
            raise ByzantineError(f"alie: {f} colluders among {n} workers: need 1 <= f < n")
        return dataclasses.replace(self, n=n, f=f)

    def z_for(self, n_honest: int) -> float:
        """The z used when the colluders see `n_honest` honest views."""
        if self.z is not None:
            return self.z
        f = 1 if self.f is None else self.f
        return alie_z(self.n if self.n is not None else n_honest + f, f)

    def _poison(self, own, views, rng, ref, xp):
        mean = views.mean(axis=0, dtype=xp.float64)
        std = views.std(axis=0, dtype=xp.float64)
        return mean - self.z_for(views.shape[0]) * std


@dataclasses.dataclass(frozen=True)
class Ipm(Behaviour):
    """r - epsilon * (mean - r): the honest mean update, reversed and scaled by epsilon.

    Xie et al. use a small epsilon (0.1) against Krum-like rules, so the crafted update stays
    close enough to be selected, and a large one against the plain mean.
    """

    KIND: ClassVar[str] = "ipm"
    PARAMS: ClassVar[dict[str, type]] = {"epsilon": float}
    needs_honest_views: ClassVar[bool] = True
    epsilon: float = 0.1

    def __post_init__(self) -> None:
        check_positive(self.KIND, "epsilon", self.epsilon)

    @property
    def wants_reference(self) -> bool:
        return True

    def _poison(self, own, views, rng, ref, xp):
        mean = views.mean(axis=0, dtype=xp.float64)
        if ref is None:  # library use only: the node always passes a reference
            return -self.epsilon * mean
        return ref - self.epsilon * (mean - ref)


@dataclasses.dataclass(frozen=True)
class Dissensus(Behaviour):
    """x_i - epsilon (mean - x_i) to each honest peer i: its own model pushed away from the
    honest mean, by epsilon x its distance to it (He, Karimireddy and Jaggi 2022, "Byzantine-
    robust decentralized learning via ClippedGossip", the dissensus attack). Against gossip a
    liar need not pull everyone off course: cancelling each neighbour's consensus step keeps the
    honest models apart, so non-iid peers never learn each other's classes. In a group of
    k = 3 (the average round) the honest answers move i by (k - 1)/(k + 1) (mean - x_i), the
    liar's by -epsilon/(k + 1) (mean - x_i): epsilon = k - 1 cancels the step, more reverses it.
    """

    KIND: ClassVar[str] = "dissensus"
    PARAMS: ClassVar[dict[str, type]] = {"epsilon": float}
    needs_honest_views: ClassVar[bool] = True
    per_recipient: ClassVar[bool] = True
    epsilon: float = 2.0

    def __post_init__(self) -> None:
        check_positive(self.KIND, "epsilon", self.epsilon)

    def _poison_for(self, own, views, rng, ref, xp, recipient):
        mean = views.mean(axis=0, dtype=xp.float64)
        return recipient - self.epsilon * (mean - recipient)


@dataclasses.dataclass(frozen=True)
class Mimic(Behaviour):
    """A copy of one honest peer: the node orders the views by peer id, so `index` pins the
    same peer from one refresh to the next (while it stays alive and honest)."""

    KIND: ClassVar[str] = "mimic"
    PARAMS: ClassVar[dict[str, type]] = {"index": int}
    needs_honest_views: ClassVar[bool] = True
    index: int = 0

    def __post_init__(self) -> None:
        if self.index < 0:
            raise FaultSpecError(f"mimic:{self.index}: index must be >= 0")

    def _poison(self, own, views, rng, ref, xp):
        return views[self.index % views.shape[0]].copy()


@dataclasses.dataclass(frozen=True)
class NonFinite(Behaviour):
    """A random `fraction` of the coordinates set to NaN (`nan`) or to +-Inf (`inf`)."""

    KIND: ClassVar[str] = "nan"
    PARAMS: ClassVar[dict[str, type]] = {"fraction": float}
    fraction: float = 1.0

    def __post_init__(self) -> None:
        if not (math.isfinite(self.fraction) and 0 < self.fraction <= 1):
            raise FaultSpecError(f"{self.KIND}:{self.fraction}: fraction must be in (0, 1]")

    def _values(self, rng: np.random.Generator, count: int) -> np.ndarray:
        return np.full(count, np.nan, dtype=np.float32)

    def _poison(self, own, views, rng, ref, xp):
        out = own.astype(xp.float32, copy=True)
        count = max(1, round(self.fraction * own.size)) if own.size else 0
        where = (
            np.arange(own.size) if count == own.size else rng.choice(own.size, count, replace=False)
        )
        out[xp.asarray(where)] = xp.asarray(self._values(rng, count))
        return out


@dataclasses.dataclass(frozen=True)
class Infinite(NonFinite):
    KIND: ClassVar[str] = "inf"

    def _values(self, rng: np.random.Generator, count: int) -> np.ndarray:
        return np.where(rng.random(count) < 0.5, np.inf, -np.inf).astype(np.float32)


@dataclasses.dataclass(frozen=True)
class Garbage(Behaviour):
    KIND: ClassVar[str] = "garbage"

    def _poison(self, own, views, rng, ref, xp):
        # Random bit patterns cover every exponent: denormals, 1e38s, a few NaN/Inf.
        bits = rng.integers(0, 2**32, size=own.size, dtype=np.uint32)
        return xp.asarray(bits.view(np.float32))


@dataclasses.dataclass(frozen=True)
class Huge(Behaviour):
    KIND: ClassVar[str] = "huge"
    PARAMS: ClassVar[dict[str, type]] = {"scale": float}
    scale: float = 1e6

    def __post_init__(self) -> None:
        check_positive(self.KIND, "scale", self.scale)

    def _poison(self, own, views, rng, ref, xp):
        with np.errstate(over="ignore"):  # overflow to Inf is an acceptable poison
            return own * xp.float32(self.scale)


@dataclasses.dataclass(frozen=True)
class LabelFlip(Behaviour):
    KIND: ClassVar[str] = "label-flip"
    poisons_labels: ClassVar[bool] = True

    def transform_labels(self, y: Array, n_classes: int) -> Array:
        return flip_labels(y, n_classes)

    def _poison(self, own, views, rng, ref, xp):
        return own.copy()  # the poison is in the training data, not in what is served


def alie_z(n: int, f: int) -> float:
    """z_max of Baruch et al. 2019: s = floor(n/2 + 1) - f, z = Phi^-1((n - s) / n).

    `s` is how many honest workers the colluders must sway to hold a majority. When the
    colluders are a majority themselves (s < 1) the formula has no stealth bound; s = 1 is used,
    the largest z it gives for that n. Example: n = 50, f = 24 -> s = 2, z = Phi^-1(0.96) = 1.75.
    """
    if isinstance(n, bool) or isinstance(f, bool) or not (1 <= f < n):
        raise FaultSpecError(f"alie: n={n}, f={f}: need integers with 1 <= f < n")
    s = max(1, math.floor(n / 2 + 1) - f)
    return NormalDist().inv_cdf((n - s) / n)


def flip_labels(y: Array, n_classes: int) -> Array:
    """y -> n_classes - 1 - y (an involution); same array module and dtype as `y`."""
    if isinstance(n_classes, bool) or not isinstance(n_classes, int) or n_classes < 2:
        raise ByzantineError(f"label-flip: n_classes must be an integer >= 2, got {n_classes!r}")
    array_module(y)  # rejects anything that is not a numpy or cupy array
    if y.dtype.kind not in "iu":
        raise ShapeError(f"label-flip: labels must be integers, got dtype {y.dtype}")
    if y.size and (int(y.min()) < 0 or int(y.max()) >= n_classes):
        raise ByzantineError(f"label-flip: labels outside [0, {n_classes})")
    return (n_classes - 1 - y).astype(y.dtype, copy=False)


def check_positive(kind: str, key: str, value: float) -> None:
    if not (math.isfinite(value) and value > 0):
        raise FaultSpecError(f"{kind}:{key}={value}: must be finite and > 0")
